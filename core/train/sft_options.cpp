// [train.sft] declared, checked and read; the chat template a run names; see sft_options.hpp.
#include "train/sft_options.hpp"

#include "common/error.hpp"
#include "eval/chat_template.hpp"
#include "patchbay/component.hpp"

namespace patchbay::train {

namespace fs = std::filesystem;

void declare_sft_section(config::SchemaRegistry& schema) {
  using Field = patchbay::Field;
  config::HostSection section;
  section.path = "train.sft";
  section.summary =
      "instruction tuning: conversations (JSON Lines), chat template, sequences past the context";
  section.fields = {
      Field::string(
          "data", "\"\"",
          "JSON Lines file of conversations: {\"messages\": [{\"role\", \"content\"}, ...]} or "
          "{\"prompt\", \"response\"} per line (required for train.objective = \"sft\")"),
      Field::string("validation_data", "\"\"",
                    "JSON Lines file of validation conversations; empty: the last "
                    "validation_fraction of data"),
      Field::real("validation_fraction", "0.1",
                  "share of data held out for validation when validation_data is empty")
          .range(1e-6, 0.9),
      Field::string(
          "template", "\"auto\"",
          "chat template: \"auto\" (the one beside train.init_from: chat_template.jinja or "
          "tokenizer_config.json), \"chatml\", \"llama3\", a .jinja file or a model directory"),
      Field::string("overlong", "\"truncate\"",
                    "a conversation longer than train.seq_len + 1 tokens: \"truncate\" (keep the "
                    "start, counted "
                    "in the log; dropped when no assistant token is left) or \"refuse\"")
          .choices("truncate|refuse"),
      Field::boolean("pack_examples", "false",
                     "pack several conversations into each training row, first-fit, with no "
                     "attention across them and positions restarting at each (docs/packing.md); "
                     "needs attention with the packed-sequences capability (dense)"),
  };
  schema.add_section(std::move(section));
}

void add_sft_defaults(config::ResolvedConfig& config) {
  toml::table* train = config.table()["train"].as_table();
  if (train != nullptr && !train->contains("sft")) train->insert("sft", toml::table{});
}

void check_sft(const config::ResolvedConfig& config) {
  const toml::node* causal = config.find("model.causal");
  if (causal != nullptr && causal->is_boolean() && !causal->as_boolean()->get())
    throw Error(
        ErrorKind::kInvalidArgument,
        "train.objective = \"sft\" trains a causal LM to answer, but model.causal = false builds a "
        "bidirectional model (each position would see the answer it predicts); set model.causal = "
        "true");
  if (config_string(config, "train.sft.data").empty())
    throw Error(ErrorKind::kInvalidArgument,
                "train.objective = \"sft\" reads conversations from [train.sft] data, which is "
                "empty; set it to a "
                "JSON Lines file ({\"messages\": [...]} or {\"prompt\", \"response\"} per line)");
}

std::string resolve_chat_template_spec(const std::string& spec, const fs::path& init_from) {
  if (spec != "auto") return spec;
  const std::string choices =
      "set train.sft.template to \"chatml\", \"llama3\", a .jinja file, or the imported run's "
      "directory "
      "(patchbay import writes chat_template.jinja there)";
  if (init_from.empty())
    throw Error(ErrorKind::kInvalidArgument,
                "train.sft.template = \"auto\" takes the template of the model in train.init_from, "
                "which is "
                "empty; " +
                    choices);
  for (const fs::path& dir :
       {init_from, init_from.parent_path(), init_from.parent_path().parent_path()})
    if (!dir.empty() && fs::is_directory(dir) && eval::directory_has_chat_template(dir))
      return dir.string();
  throw Error(ErrorKind::kInvalidArgument,
              "train.sft.template = \"auto\": no chat template beside train.init_from '" +
                  init_from.string() +
                  "' (looked for chat_template.jinja and tokenizer_config.json "
                  "with a \"chat_template\"); " +
                  choices);
}

SftOptions sft_options_from_config(const config::ResolvedConfig& config,
                                   const TrainOptions& options) {
  SftOptions o;
  o.data = config_string(config, "train.sft.data");
  o.validation_data = config_string(config, "train.sft.validation_data");
  o.validation_fraction = config_real(config, "train.sft.validation_fraction");
  o.overlong = config_string(config, "train.sft.overlong") == "refuse" ? Overlong::kRefuse
                                                                       : Overlong::kTruncate;
  o.seq_len = options.seq_len;
  o.chat_template = config_string(config, "train.sft.template");
  o.init_from = options.init_from;
  o.pack_examples = config.find("train.sft.pack_examples") != nullptr &&
                    config.find("train.sft.pack_examples")->value<bool>().value_or(false);
  return o;
}

std::string chat_template_spec_of(const config::ResolvedConfig& config) {
  const toml::node* spec = config.find("train.sft.template");
  if (spec == nullptr || !spec->is_string()) return "";
  const toml::node* init_from = config.find("train.init_from");
  return resolve_chat_template_spec(
      spec->value<std::string>().value_or("auto"),
      init_from != nullptr ? init_from->value<std::string>().value_or("") : "");
}

}  // namespace patchbay::train
