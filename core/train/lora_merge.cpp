// Merging a LoRA run into a plain run; see lora_merge.hpp.
#include "train/lora_merge.hpp"

#include <spdlog/spdlog.h>

#include "common/error.hpp"
#include "config/config_loader.hpp"
#include "config/config_printer.hpp"
#include "patchbay/abi.h"
#include "run/atomic_file.hpp"
#include "train/checkpoint.hpp"
#include "train/trainer.hpp"

namespace patchbay::train {

namespace fs = std::filesystem;

namespace {

// The run's config without its fine-tuning keys: the merged weights are the whole model.
std::string plain_config_text(const config::ResolvedConfig& adapted, const fs::path& out_dir,
                              const config::ComponentSchemaLookup& lookup) {
  config::ResolvedConfig plain = adapted;
  toml::table* train = plain.table()["train"].as_table();
  if (train != nullptr) {
    train->erase("lora");
    train->insert_or_assign("init_from", "");
    train->insert_or_assign("out_dir", fs::absolute(out_dir).lexically_normal().string());
  }
  validate_training_config(plain, lookup);
  return config::to_toml(plain);
}

// RUN/checkpoints/step_N(.safetensors) -> RUN; a path elsewhere -> its folder.
fs::path run_directory_of(const fs::path& checkpoint_file) {
  const fs::path folder = checkpoint_file.parent_path();
  return folder.filename() == "checkpoints" ? folder.parent_path() : folder;
}

// The files a run's chat template lives in (core/eval/chat_template.hpp: a GGUF import's
// chat_template.jinja with imported_model.json's bos/eos, or HF's tokenizer_config.json),
// copied from `from` into `out` where `out` lacks them.
void copy_chat_template_files(const fs::path& from, const fs::path& out) {
  for (const char* name : {"chat_template.jinja", "imported_model.json", "tokenizer_config.json"}) {
    std::error_code ec;
    if (fs::is_regular_file(from / name, ec) && !fs::exists(out / name, ec))
      fs::copy_file(from / name, out / name, ec);
  }
}

}  // namespace

LoraMergeResult merge_lora_run(const fs::path& run_or_checkpoint, const fs::path& out_dir,
                               runtime::Registry& registry,
                               const config::ComponentSchemaLookup& lookup,
                               const InitialWeightsReader& read_base) {
  const Checkpoint checkpoint = load_checkpoint(run_or_checkpoint);
  if (checkpoint.metadata().count(kMetaLora) == 0)
    throw Error(
        ErrorKind::kInvalidArgument,
        checkpoint.path().string() +
            " has no LoRA adapters (it was not trained with [train.lora]); it is a plain run "
            "already: use it as it is");
  if (fs::exists(out_dir / "checkpoints") || fs::exists(out_dir / "config.toml"))
    throw Error(ErrorKind::kInvalidArgument,
                out_dir.string() + " already holds a run; give an empty or new folder");
  config::ResolvedConfig config =
      config::load_config_text(checkpoint.config_text(), checkpoint.path().string() + " (config)");
  validate_training_config(config, lookup);
  const fs::path base_path = checkpoint.meta(kMetaInitFrom);
  const InitialWeights base = read_base ? read_base(base_path) : read_checkpoint_weights(base_path);
  const auto wte = base.tensors.find("wte.weight");
  if (wte == base.tensors.end())
    throw Error(ErrorKind::kInvalidArgument,
                "the base weights (" + base.origin + ") have no wte.weight");
  TrainableModel adapted =
      build_trainable_model(config, registry, lookup, wte->second.size(0), 0, 1, &base);
  std::vector<NamedTensor> adapters;
  for (const model::NamedParameter& p : adapted.parameters) adapters.push_back({p.name, p.tensor});
  checkpoint.load_into(adapters);
  adapted.lora->merge_into_weights();

  fs::create_directories(out_dir);
  const std::string config_text = plain_config_text(config, out_dir, lookup);
  run::write_text_atomically(out_dir / "config.toml", config_text);
  const fs::path tokenizer = checkpoint.meta(kMetaTokenizerFile);
  if (fs::is_regular_file(tokenizer))
    fs::copy_file(tokenizer, out_dir / "tokenizer.txt", fs::copy_options::overwrite_existing);
  // The chat template travels with the weights: the LoRA run's own files first, then the base
  // model's (an imported GGUF or HF run), so `patchbay chat` of the merged run finds it.
  copy_chat_template_files(run_directory_of(checkpoint.path()), out_dir);
  copy_chat_template_files(fs::is_directory(base_path) ? base_path : run_directory_of(base_path),
                           out_dir);
  std::vector<NamedTensor> tensors;
  for (const model::NamedParameter& p : adapted.model->parameters())
    tensors.push_back({p.name, p.tensor});
  std::map<std::string, std::string> metadata = checkpoint.metadata();
  metadata.erase(kMetaLora);
  metadata.erase(kMetaInitFrom);
  metadata.erase(kMetaFormat);
  metadata.erase(kMetaStep);
  metadata[kMetaConfig] = config_text;
  metadata[kMetaSourceRevision] = source_revision();
  metadata[kMetaTokenizerFile] = (out_dir / "tokenizer.txt").string();
  metadata["merged_from"] =
      checkpoint.path().string() + " (LoRA " + checkpoint.meta(kMetaLora) + ") on " + base.origin;
  LoraMergeResult result;
  result.step = checkpoint.step();
  result.adapters = adapted.lora->adapters().size();
  result.checkpoint = save_checkpoint(out_dir, checkpoint.step(), tensors, metadata);
  spdlog::info("merged {} LoRA adapters of {} into {}", result.adapters, checkpoint.path().string(),
               result.checkpoint.string());
  return result;
}

}  // namespace patchbay::train
