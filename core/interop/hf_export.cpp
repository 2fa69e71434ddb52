// export_to_hf (hf_io.hpp): a run's checkpoint -> a transformers model directory.
#include <cstring>
#include <nlohmann/json.hpp>
#include <sstream>

#include "common/error.hpp"
#include "config/config_loader.hpp"
#include "data/split.hpp"
#include "data/tokenizer_io.hpp"
#include "engine/tensor.hpp"
#include "interop/hf_io.hpp"
#include "interop/hf_tensors.hpp"
#include "interop/hf_tokenizer.hpp"
#include "interop/t5_architecture.hpp"
#include "model/encoder_decoder.hpp"
#include "run/atomic_file.hpp"
#include "run/safetensors.hpp"
#include "train/checkpoint.hpp"
#include "train/train_config.hpp"

namespace patchbay::interop {

namespace fs = std::filesystem;
using nlohmann::json;

namespace {

HostTensor host_tensor(const train::Checkpoint& checkpoint, const std::string& name) {
  const engine::Tensor t = checkpoint.tensor(name).to(engine::DType::kF32).contiguous();
  HostTensor h;
  h.shape = t.shape();
  h.data.assign(t.data<float>(), t.data<float>() + t.numel());
  return h;
}

std::vector<UsedComponent> used_components(const train::Checkpoint& checkpoint) {
  std::vector<UsedComponent> used;
  const auto it = checkpoint.metadata().find(train::kMetaComponents);
  if (it == checkpoint.metadata().end()) return used;
  for (const json& c : json::parse(it->second))
    used.push_back({c.value("kind", ""), c.value("name", ""), c.value("plugin", "")});
  return used;
}

// The tokenizer file the run saved: the stored path, else tokenizer.txt beside checkpoints/.
fs::path run_tokenizer_file(const train::Checkpoint& checkpoint) {
  const fs::path stored = checkpoint.meta(train::kMetaTokenizerFile);
  if (fs::is_regular_file(stored)) return stored;
  const fs::path beside = checkpoint.path().parent_path().parent_path() / stored.filename();
  if (fs::is_regular_file(beside)) return beside;
  throw Error(ErrorKind::kNotFound, "the checkpoint's tokenizer file " + stored.string() + " (or " +
                                        beside.string() +
                                        ") does not exist; the export needs the run's tokenizer");
}

bool all_zero(const HostTensor& t) {
  for (float v : t.data)
    if (v != 0.0f) return false;
  return true;
}

void write_json(const fs::path& path, const json& value, std::vector<fs::path>& files) {
  run::write_text_atomically(path, value.dump(2) + "\n");
  files.push_back(path);
}

// The run's training settings as TOML: [data], [optimizer] (with its kind's table), [train]
// without out_dir (run.seed is stored beside it). `patchbay import` puts them back, so the imported
// run trains and evaluates on the same data windows (batch size, sequence length, eval batches)
// with the same optimizer settings as the exported one.
std::string training_settings_toml(const config::ResolvedConfig& config) {
  toml::table kept;
  for (const char* section : {"data", "optimizer", "train"})
    if (const toml::table* table = config.table().get_as<toml::table>(section))
      kept.insert(section, *table);
  if (toml::table* train = kept.get_as<toml::table>("train")) train->erase("out_dir");
  std::ostringstream text;
  text << toml::toml_formatter{kept};
  return text.str();
}

// The HF shape of the checkpoint's model: T5 for an encoder-decoder, else GPT-2 or LLaMA.
HfModelShape export_shape(const train::Checkpoint& checkpoint,
                          const config::ResolvedConfig& config) {
  const model::ComponentTables tables = model::component_tables_from_config(config);
  if (model::model_architecture(config) == "encoder_decoder") {
    const engine::Tensor embed = checkpoint.contains("shared.weight")
                                     ? checkpoint.tensor("shared.weight")
                                     : checkpoint.tensor("encoder.embed.weight");
    return t5_shape_of_model(model::encoder_decoder_options_from_config(config, embed.size(0)),
                             tables, used_components(checkpoint));
  }
  const engine::Tensor wte = checkpoint.tensor("wte.weight");
  return hf_shape_of_model(model::model_options_from_config(config, wte.size(0)), tables,
                           used_components(checkpoint));
}

}  // namespace

HfExportResult export_to_hf(const fs::path& run_or_checkpoint, const fs::path& out_dir) {
  const train::Checkpoint checkpoint = train::load_checkpoint(run_or_checkpoint);
  const config::ResolvedConfig config = config::load_config_text(
      checkpoint.config_text(), checkpoint.path().string() + " (stored config)");
  HfExportResult result;
  result.checkpoint = checkpoint.path();
  result.step = checkpoint.step();
  result.shape = export_shape(checkpoint, config);
  HfModelShape& shape = result.shape;
  const model::ModelOptions& options = shape.options;
  if (shape.family ==
      HfFamily::kLlama) {  // canonical LLaMA (no attention biases) when they are all zero
    bool zero = true;
    for (int64_t i = 0; i < options.n_layers && zero; ++i)
      for (const char* t : {".attn.qkv.bias", ".attn.proj.bias"})
        zero = zero && all_zero(host_tensor(checkpoint, "blocks." + std::to_string(i) + t));
    shape.attention_bias = !zero;
  }

  // Tokenizer first: its vocabulary must be the model's.
  const std::string kind = train::config_string(config, "tokenizer.kind");
  const fs::path tokenizer_file = run_tokenizer_file(checkpoint);
  const std::string tokenizer_text = data::read_text_file(tokenizer_file);
  const HfTokenizerFiles tokenizer = tokenizer_to_hf(kind, tokenizer_text, options.context_length);
  if (tokenizer.vocab_size != options.vocab_size)
    throw Error(ErrorKind::kInvalidArgument, "the run's tokenizer " + tokenizer_file.string() +
                                                 " has " + std::to_string(tokenizer.vocab_size) +
                                                 " ids but wte.weight has " +
                                                 std::to_string(options.vocab_size) + " rows");
  std::optional<int64_t> eos;
  if (!tokenizer.specials.empty()) eos = tokenizer.first_special_id;
  if (shape.family == HfFamily::kT5) {  // T5's ids: decoder start = pad = "<pad>", eos = "</s>"
    for (size_t i = 0; i < tokenizer.specials.size(); ++i) {
      const int64_t id = tokenizer.first_special_id + static_cast<int64_t>(i);
      if (tokenizer.specials[i] == "<pad>") shape.t5.pad_id = id;
      if (tokenizer.specials[i] == "</s>") shape.t5.eos_id = id;
    }
  }

  fs::create_directories(out_dir);
  // Tensors: every rule's HF parts, f32, in rule order.
  std::vector<HostTensor> hf_tensors;
  std::vector<std::string> hf_names;
  for (const TensorRule& rule : hf_tensor_rules(shape)) {
    HostTensor whole;
    if (rule.patchbay_absent) {
      whole.shape = rule.patchbay_shape;
      whole.data.assign(static_cast<size_t>(engine::shape_numel(rule.patchbay_shape)), 0.0f);
    } else {
      whole = host_tensor(checkpoint, rule.patchbay_name);
      if (whole.shape != rule.patchbay_shape)
        throw Error(ErrorKind::kInvalidArgument,
                    "checkpoint tensor '" + rule.patchbay_name +
                        "' does not have the shape its config implies");
    }
    if (rule.hf_absent) {  // LLaMA's checked zero above; T5's biases are checked here
      if (!all_zero(whole))
        throw Error(ErrorKind::kInvalidArgument,
                    "cannot export to Hugging Face format: '" + rule.patchbay_name +
                        "' is not zero, and " + hf_architecture(shape.family) +
                        " has no such bias. Train with the bias off ([model.attention] bias = "
                        "false, [model.feedforward] bias = false) to export");
      continue;
    }
    for (const HfTensorPart& part : rule.parts) {
      hf_tensors.push_back(slice_for_hf(whole, part));
      hf_names.push_back(part.hf_name);
    }
  }
  std::vector<run::TensorToWrite> writes;
  for (size_t i = 0; i < hf_tensors.size(); ++i)
    writes.push_back({hf_names[i], run::StoredDType::kF32, hf_tensors[i].shape,
                      std::as_bytes(std::span<const float>(hf_tensors[i].data))});
  run::write_safetensors(out_dir / "model.safetensors", writes, {{"format", "pt"}});
  result.files.push_back(out_dir / "model.safetensors");

  write_json(out_dir / "config.json", hf_config_json(shape, eos), result.files);
  write_json(out_dir / "generation_config.json", hf_generation_config_json(shape, eos),
             result.files);
  write_json(out_dir / "tokenizer.json", tokenizer.tokenizer, result.files);
  write_json(out_dir / "tokenizer_config.json", tokenizer.tokenizer_config, result.files);
  write_json(out_dir / "special_tokens_map.json", tokenizer.special_tokens_map, result.files);
  result.tokenizer_exact = tokenizer.exact;
  result.notes = tokenizer.notes;
  if (!tokenizer.exact) {  // the ids contract is Patchbay's own file
    run::write_text_atomically(out_dir / "patchbay_tokenizer.txt", tokenizer_text);
    result.files.push_back(out_dir / "patchbay_tokenizer.txt");
    result.notes.push_back("patchbay_tokenizer.txt is the ids contract; `patchbay import` uses it");
  }
  const auto revision = checkpoint.metadata().find(train::kMetaSourceRevision);
  write_json(
      out_dir / "patchbay_export.json",
      {{"checkpoint", fs::absolute(checkpoint.path()).lexically_normal().string()},
       {"step", result.step},
       {"source_revision", revision == checkpoint.metadata().end() ? "unknown" : revision->second},
       {"architecture", hf_architecture(shape.family)},
       {"tokenizer_kind", kind},
       {"tokenizer_fnv1a64", std::to_string(data::fnv1a64(tokenizer_text))},
       {"tokenizer_exact", tokenizer.exact},
       {"training_settings_toml", training_settings_toml(config)},
       {"training_seed", config.find("run.seed") != nullptr && config.find("run.seed")->is_integer()
                             ? json(config.find("run.seed")->as_integer()->get())
                             : json(nullptr)},
       {"notes", result.notes}},
      result.files);
  return result;
}

}  // namespace patchbay::interop
