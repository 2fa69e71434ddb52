// Loading a checkpoint's model for decoding; see checkpoint_model.hpp.
#include "cli/checkpoint_model.hpp"

#include <cstdio>
#include <filesystem>

#include "cli/checkpoint_tokenizer.hpp"
#include "cli/device_option.hpp"
#include "common/error.hpp"
#include "config/config_loader.hpp"
#include "data/split.hpp"
#include "data/tokenizer_io.hpp"
#include "runtime/registry.hpp"
#include "train/objective.hpp"
#include "train/sft_options.hpp"
#include "train/train_config.hpp"

namespace patchbay::cli {
namespace {

namespace fs = std::filesystem;

void check_tokenizer_hash(const train::Checkpoint& checkpoint, const fs::path& file) {
  const uint64_t hash = data::fnv1a64(data::read_text_file(file));
  char hex[17];
  std::snprintf(hex, sizeof(hex), "%016llx", static_cast<unsigned long long>(hash));
  const std::string& stored = checkpoint.meta(train::kMetaTokenizerHash);
  if (stored != std::to_string(hash) && stored != hex) {
    throw Error(ErrorKind::kInvalidArgument,
                "tokenizer file " + file.string() + " differs from the one the run used " +
                    "(fnv1a64 " + hex + ", checkpoint records " + stored + ")");
  }
}

runtime::TokenizerHandle load_run_tokenizer(const train::Checkpoint& checkpoint,
                                            const config::ResolvedConfig& config,
                                            runtime::Registry& registry) {
  const fs::path tokenizer_file = tokenizer_file_of(checkpoint);
  check_tokenizer_hash(checkpoint, tokenizer_file);
  data::TokenizerSettings settings;
  settings.kind = train::config_string(config, "tokenizer.kind");
  return data::load_tokenizer(registry, tokenizer_file, settings);
}

}  // namespace

CheckpointModel open_checkpoint_run(const std::string& path, const GlobalOptions& global,
                                    const std::string& device) {
  train::Checkpoint checkpoint = train::load_checkpoint(path);
  config::ResolvedConfig config = config::load_config_text(
      checkpoint.config_text(), checkpoint.path().string() + " (stored config)");
  (void)apply_device_option(config, device);
  ComponentLookup components = make_component_lookup(global, config, recorded_plugins(checkpoint));
  if (!components.registry) throw Error(ErrorKind::kInternal, components.unavailable_reason);
  train::validate_training_config(config, components.lookup);
  runtime::TokenizerHandle tokenizer = load_run_tokenizer(checkpoint, config, *components.registry);
  return CheckpointModel{std::move(checkpoint), std::move(config), std::move(components),
                         std::move(tokenizer), nullptr};
}

void build_checkpoint_model(CheckpointModel& run, const std::string& weights_dtype) {
  if (weights_dtype != "f32" && weights_dtype != "bf16")
    throw Error(ErrorKind::kInvalidArgument,
                "--weights-dtype: expected f32 or bf16, found '" + weights_dtype + "'");
  const config::ResolvedConfig& config = run.config;
  // The run's objective (objective.hpp) says whether its model continues text left to right.
  const std::string objective = train::objective_name(config);
  if (!train::make_objective(config, train::train_options_from_config(config), run.tokenizer)
           ->makes_samples())
    throw Error(ErrorKind::kInvalidArgument,
                run.checkpoint.path().string() +
                    " holds a model trained with train.objective = \"" + objective + "\" (" +
                    train::find_objective(objective).summary +
                    "), which cannot continue text left to right. Score it with `patchbay eval " +
                    run.checkpoint.path().string() +
                    "` (its own loss and metrics); generate with a model trained causally");
  run.model = model::LanguageModel::build(
      model::model_options_from_config(config, run.tokenizer.vocab_size()),
      model::component_tables_from_config(config), *run.components.registry);
  std::vector<train::NamedTensor> params;
  for (const model::NamedParameter& p : run.model->parameters())
    params.push_back({p.name, p.tensor});
  run.checkpoint.load_into(params);
  if (weights_dtype == "bf16")
    run.model->convert_weights_for_inference(engine::DType::kBF16);  // half the bytes
}

CheckpointModel load_checkpoint_model(const std::string& path, const GlobalOptions& global,
                                      const std::string& device, const std::string& weights_dtype) {
  if (weights_dtype != "f32" && weights_dtype != "bf16")
    throw Error(ErrorKind::kInvalidArgument,
                "--weights-dtype: expected f32 or bf16, found '" + weights_dtype + "'");
  CheckpointModel run = open_checkpoint_run(path, global, device);
  build_checkpoint_model(run, weights_dtype);
  return run;
}

eval::ChatTemplate chat_template_of_run(const CheckpointModel& run, const std::string& given) {
  if (!given.empty()) return eval::find_chat_template(given);
  const fs::path run_dir =
      run.checkpoint.path().parent_path().parent_path();  // RUN/checkpoints/step_N
  if (eval::directory_has_chat_template(run_dir)) return eval::find_chat_template(run_dir.string());
  std::string tuned;
  try {
    tuned = train::chat_template_spec_of(run.config);
  } catch (const Error&) {
    // "auto" beside an init_from that is gone (a merged export drops it): no template known.
  }
  if (!tuned.empty()) return eval::find_chat_template(tuned);
  throw Error(
      ErrorKind::kInvalidArgument,
      run_dir.string() +
          " has no chat template (no chat_template.jinja or tokenizer_config.json, and the run "
          "was not instruction-tuned with train.sft.template); give one with --template chatml, "
          "--template llama3 or --template FILE.jinja");
}

}  // namespace patchbay::cli
