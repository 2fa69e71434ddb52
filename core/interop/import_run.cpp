// write_imported_run (import_run.hpp): shape + tokenizer + tensors -> a run directory with a
// step-0 checkpoint written by train::save_checkpoint, with the metadata a training run writes.
#include "interop/import_run.hpp"

#include <nlohmann/json.hpp>
#include <set>
#include <sstream>

#include "common/error.hpp"
#include "config/config_loader.hpp"
#include "config/config_printer.hpp"
#include "data/split.hpp"
#include "data/tokenizer_io.hpp"
#include "engine/ops.hpp"
#include "engine/tensor.hpp"
#include "patchbay/abi.h"
#include "run/atomic_file.hpp"
#include "train/checkpoint.hpp"
#include "train/trainer.hpp"

namespace patchbay::interop {

namespace fs = std::filesystem;
using nlohmann::json;

namespace {

std::string toml_string(const std::string& text) {
  return json(text).dump();
}  // JSON escapes are TOML's

}  // namespace

// Every tensor the shape implies is present with that shape, and none is left over, read from
// the source's index alone: a configuration whose sizes disagree with the weights (a missing
// or mistyped key) is refused before anything of the configuration's size is allocated.
void check_source_shapes(const HfModelShape& shape, const ImportTensorSource& source,
                         const std::string& origin) {
  std::set<std::string> used;
  for (const TensorRule& rule : hf_tensor_rules(shape)) {
    if (rule.patchbay_absent || rule.hf_absent) continue;
    for (const HfTensorPart& part : rule.parts) {
      std::string found_as;
      std::vector<int64_t> stored;
      if (!source.stored_shape(part.hf_name, &stored, &found_as))
        throw Error(ErrorKind::kInvalidArgument,
                    "cannot import: tensor '" + part.hf_name + "' is missing from " + origin +
                        " (its configuration implies it; are the configuration's sizes right?)");
      const std::vector<int64_t> expected = hf_part_shape(rule.patchbay_shape, part);
      if (stored != expected)
        throw Error(ErrorKind::kInvalidArgument,
                    "cannot import: tensor '" + part.hf_name + "' of " + origin + " has shape " +
                        engine::shape_str(stored) + "; its configuration implies " +
                        engine::shape_str(expected) + " (are the configuration's sizes right?)");
      used.insert(found_as);
    }
  }
  std::string unused;
  for (const std::string& name : source.names())
    if (used.count(name) == 0 && !source.ignorable(name) &&
        !(name == "lm_head.weight" && (shape.options.tie_embeddings || shape.t5.head_from_shared)))
      unused += (unused.empty() ? "" : ", ") + name;
  if (!unused.empty())
    throw Error(ErrorKind::kInvalidArgument,
                "cannot import: tensors of " + origin + " without a Patchbay counterpart: " +
                    unused.substr(0, 2000) + " (the model's configuration does not describe them)");
}

std::map<std::string, HostTensor> patchbay_tensors_from(const HfModelShape& shape,
                                                        ImportTensorSource& source,
                                                        const std::string& origin) {
  check_source_shapes(shape, source, origin);
  std::map<std::string, HostTensor> out;
  std::set<std::string> used;
  for (const TensorRule& rule : hf_tensor_rules(shape)) {
    if (rule.patchbay_absent) continue;
    HostTensor whole;
    whole.shape = rule.patchbay_shape;
    whole.data.assign(static_cast<size_t>(engine::shape_numel(rule.patchbay_shape)), 0.0f);
    if (!rule.hf_absent) {
      for (const HfTensorPart& part : rule.parts) {
        std::string found_as;
        HostTensor stored;
        if (!source.fetch(part.hf_name, &stored, &found_as))
          throw Error(ErrorKind::kInvalidArgument, "cannot import: tensor '" + part.hf_name +
                                                       "' is missing from " + origin +
                                                       " (its configuration implies it)");
        place_from_hf(whole, part, stored);
        used.insert(found_as);
      }
    }
    out.emplace(rule.patchbay_name, std::move(whole));
  }
  std::string unused;
  for (const std::string& name : source.names())
    if (used.count(name) == 0 && !source.ignorable(name) &&
        !(name == "lm_head.weight" && (shape.options.tie_embeddings || shape.t5.head_from_shared)))
      unused += (unused.empty() ? "" : ", ") + name;
  if (!unused.empty())
    throw Error(ErrorKind::kInvalidArgument,
                "cannot import: tensors of " + origin + " without a Patchbay counterpart: " +
                    unused + " (the model's configuration does not describe them)");
  return out;
}

HfImportResult write_imported_run(const ImportedRunInputs& inputs, ImportTensorSource& weights,
                                  const fs::path& run_dir, runtime::Registry& registry,
                                  const config::ComponentSchemaLookup& lookup,
                                  const HfImportOptions& options) {
  HfImportResult result;
  result.run_dir = run_dir;
  result.shape = inputs.shape;
  result.tokenizer_source = inputs.tokenizer_source;
  const HfModelShape& shape = result.shape;
  const PatchbayTokenizerFile& tokenizer = inputs.tokenizer;
  result.tokenizer_kind = tokenizer.kind;
  if (tokenizer.vocab_size != shape.options.vocab_size)
    throw Error(ErrorKind::kInvalidArgument,
                "cannot import: the tokenizer (" + result.tokenizer_source + ") has " +
                    std::to_string(tokenizer.vocab_size) + " ids but the model's vocab_size is " +
                    std::to_string(shape.options.vocab_size) +
                    " (a padded vocabulary is not supported)");
  if (fs::exists(run_dir / "checkpoints") || fs::exists(run_dir / "metrics.jsonl")) {
    if (!options.overwrite)
      throw Error(ErrorKind::kInvalidArgument,
                  "run directory '" + run_dir.string() +
                      "' already holds a run; choose another or pass --overwrite");
    for (const char* produced : {"checkpoints", "metrics.jsonl", "samples.txt", "train.log"})
      fs::remove_all(run_dir / produced);
  }
  fs::create_directories(run_dir);
  const fs::path tokenizer_path = run_dir / "tokenizer.txt";
  run::write_text_atomically(tokenizer_path, tokenizer.file_text);
  {  // the plugin must load what was written, with the vocabulary the model has
    const runtime::TokenizerHandle loaded =
        data::load_tokenizer(registry, tokenizer_path, {tokenizer.kind, {}, {}, {}});
    if (loaded.vocab_size() != shape.options.vocab_size)
      throw Error(ErrorKind::kInvalidArgument,
                  "cannot import: the tokenizer loaded from " + tokenizer_path.string() + " has " +
                      std::to_string(loaded.vocab_size()) + " ids but the model's vocab_size is " +
                      std::to_string(shape.options.vocab_size));
  }

  std::ostringstream text;
  for (const auto& [name, content] : inputs.extra_files)
    run::write_text_atomically(run_dir / name, content);
  text << "# Imported from " << inputs.origin << " (" << inputs.origin_format
       << ") by `patchbay import`.\n[run]\nname = "
       << toml_string(run_dir.filename().empty() ? run_dir.parent_path().filename().string()
                                                 : run_dir.filename().string())
       << "\n\n[tokenizer]\nkind = " << toml_string(tokenizer.kind)
       << "\nfile = " << toml_string(tokenizer_path.string()) << "\nspecial_tokens = [";
  for (size_t i = 0; i < tokenizer.specials.size(); ++i)
    text << (i ? ", " : "") << toml_string(tokenizer.specials[i]);
  text << "]\n\n" << patchbay_model_toml(shape);
  if (!inputs.training_toml.empty())
    text << "\n" << inputs.training_toml << "\n";
  else
    text << "\n[optimizer]\nkind = \"adamw\"\n\n[train]\nseq_len = "
         << std::min<int64_t>(128, shape.options.context_length) << "\n"
         << (shape.family == HfFamily::kT5 ? "objective = \"span_corruption\"\n" : "");
  config::ResolvedConfig config =
      config::load_config_text(text.str(), (run_dir / "config.toml").string());
  config::apply_set_override(config, "train.out_dir=" + toml_string(run_dir.string()));
  if (inputs.training_seed)
    config::apply_set_override(config, "run.seed=" + std::to_string(*inputs.training_seed));
  for (const std::string& assignment : options.overrides)
    config::apply_set_override(config, assignment);
  train::validate_training_config(config, lookup);
  const std::string config_text = config::to_toml(config);

  // The weights' shapes are checked (patchbay_tensors_from) before the model is built.
  const std::map<std::string, HostTensor> values =
      patchbay_tensors_from(shape, weights, inputs.origin);
  train::TrainableModel trainable =
      train::build_trainable_model(config, registry, lookup, tokenizer.vocab_size);
  for (const model::NamedParameter& p : trainable.parameters) {
    const auto it = values.find(p.name);
    if (it == values.end())
      throw Error(ErrorKind::kInternal, "import: no rule fills parameter '" + p.name + "'");
    engine::Tensor param = p.tensor;
    if (param.shape() != it->second.shape)
      throw Error(ErrorKind::kInternal,
                  "import: parameter '" + p.name + "' has shape " + param.str());
    engine::copy_(param,
                  engine::Tensor::from_vector(it->second.data, it->second.shape).to(param.dtype()));
  }

  std::vector<train::NamedTensor> tensors;
  for (const model::NamedParameter& p : trainable.parameters) tensors.push_back({p.name, p.tensor});
  for (const auto& s : trainable.optimizer->state())
    tensors.push_back({train::kOptimizerPrefix + s.name, s.tensor});
  std::map<std::string, std::string> metadata{
      {train::kMetaConfig, config_text},
      {train::kMetaComponents, train::components_json(config, registry, trainable.optimizer_name)},
      {train::kMetaSdkAbi,
       std::to_string(PB_ABI_VERSION_MAJOR) + "." + std::to_string(PB_ABI_VERSION_MINOR)},
      {train::kMetaSourceRevision, train::source_revision()},
      {train::kMetaTokenizerFile, tokenizer_path.string()},
      {train::kMetaTokenizerHash, std::to_string(data::fnv1a64(tokenizer.file_text))},
      {train::kMetaPluginSearchPath, train::plugin_search_path_json(registry)},
      {train::kMetaTokensSeen, "0"},
      {train::kMetaElapsedSeconds, "0"},
      {train::kMetaRng, json{{"imported_from", inputs.origin}}.dump()}};
  run::write_text_atomically(run_dir / "config.toml", config_text);
  result.checkpoint = train::save_checkpoint(run_dir, 0, tensors, metadata);
  result.parameters = trainable.model->parameter_count();
  return result;
}

}  // namespace patchbay::interop
