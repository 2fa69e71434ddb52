// `patchbay train CONFIG [--set k=v ...] [--resume RUN_DIR_OR_CHECKPOINT]`: trains the model
// a config describes (core/train/trainer.hpp) in its run directory. With --resume and no
// CONFIG, the checkpoint's own resolved config is used.
#include <boost/program_options.hpp>
#include <filesystem>
#include <iostream>
#include <optional>
#include <string>
#include <vector>

#include "cli/command.hpp"
#include "cli/component_lookup.hpp"
#include "cli/device_option.hpp"
#include "config/config_loader.hpp"
#include "interop/init_weights.hpp"
#include "run/run_directory.hpp"
#include "train/batch_record.hpp"
#include "train/checkpoint.hpp"
#include "train/trainer.hpp"

namespace patchbay::cli {
namespace {

namespace po = boost::program_options;

int run_train(const std::vector<std::string>& args, const GlobalOptions& global) {
  std::string config_file, resume;
  bool overwrite = false;
  bool resume_from_intact = false;
  std::vector<std::string> overrides;
  std::string device;
  bool no_progress = false;
  bool checkpoint_at_start = false;
  std::string record_batches;
  po::options_description options("Options");
  options.add_options()("help,h", "this help")("config", po::value(&config_file), "the experiment's TOML file")(
      "set", po::value(&overrides)->composing(), "override a key: --set train.lr=3e-4 (repeatable)")(
      "resume", po::value(&resume), "continue a run: its directory or one of its checkpoints")(
      "resume-from-intact", po::bool_switch(&resume_from_intact),
      "with --resume: when the checkpoint is corrupt, continue from the run's newest intact one")(
      "overwrite", po::bool_switch(&overwrite), "replace an earlier run in the same run directory")(
      "no-progress", po::bool_switch(&no_progress), "no progress bar (metrics and log only)")(
      "record-batches", po::value(&record_batches),
      "write every training micro-batch (inputs, targets with -100 where no loss is taken) to this "
      "JSON Lines file, one line each (appended on --resume); for side-by-side comparisons")(
      "checkpoint-at-start", po::bool_switch(&checkpoint_at_start),
      "a fresh run also writes checkpoints/step_0.safetensors before its first update");
  add_device_option(options, device);
  po::positional_options_description positional;
  positional.add("config", 1);
  po::variables_map values;
  po::store(po::command_line_parser(args).options(options).positional(positional).run(), values);
  if (values.count("help") != 0) {
    std::cout << "Usage: patchbay train CONFIG [--set key=value ...] [--resume RUN_DIR|CHECKPOINT]\n\n"
                 "Trains the model CONFIG describes: prepares the corpus and tokenizer (cached under\n"
                 "[data] output_dir), writes config.toml, train.log, metrics.jsonl, samples.txt and\n"
                 "checkpoints/ in the run directory ([train] out_dir, default <run.output_dir>/<run.name>).\n"
                 "--resume continues a run bit-identically (CPU) in the run directory it names (a moved or\n"
                 "copied run resumes where it now is); without CONFIG it uses the checkpoint's own config.\n"
                 "A run directory is trained by one process at a time (a lock file names the owner).\n"
                 "Exit code 5 for a corrupt checkpoint (the newest intact one is named), 6 when the loss\n"
                 "or gradient norm becomes NaN/Inf.\n\n"
              << options;
    return kExitOk;
  }
  po::notify(values);
  if (config_file.empty() && resume.empty()) {
    std::cerr << "patchbay train: give a CONFIG file (or --resume RUN_DIR); see patchbay train --help\n";
    return kExitUsage;
  }
  if (resume_from_intact && resume.empty()) {
    std::cerr << "patchbay train: --resume-from-intact needs --resume RUN_DIR; see patchbay train --help\n";
    return kExitUsage;
  }
  const train::CorruptCheckpoint on_corrupt =
      resume_from_intact ? train::CorruptCheckpoint::kUseNewestIntact : train::CorruptCheckpoint::kRefuse;
  std::optional<train::Checkpoint> resumed;  // read and verified once, before anything is written
  if (!resume.empty()) resumed = train::load_checkpoint(resume, on_corrupt);
  config::ResolvedConfig config;
  if (!config_file.empty()) {
    config = config::load_config(config_file, overrides);
  } else {
    config = config::load_config_text(resumed->config_text(), resumed->path().string() + " (stored config)");
    for (const std::string& assignment : overrides) config::apply_set_override(config, assignment);
  }
  (void)apply_device_option(config, device);
  // A resumed run finds the plugins it was trained with (recorded in its checkpoints).
  const RecordedPlugins recorded = resumed ? recorded_plugins(*resumed) : RecordedPlugins{};
  const ComponentLookup components = make_component_lookup(global, config, recorded);
  if (!components.registry) throw Error(ErrorKind::kInternal, components.unavailable_reason);
  train::validate_training_config(config, components.lookup);
  train::TrainRequest request;
  if (resumed) {
    request.resume = resumed->path();  // the verified file (the intact one, when it fell back)
    // --resume DIR writes into DIR, wherever the run was first trained (its config's out_dir).
    request.run_dir = run::run_dir_of_resume_path(resumed->path());
    resumed.reset();  // the trainer reads it again; do not hold two copies while it trains
  }
  request.overwrite = overwrite;
  request.show_progress = !no_progress;
  request.read_initial_weights = interop::read_initial_weights;  // runs, HF directories, GGUF
  request.checkpoint_at_start = checkpoint_at_start;
  std::optional<train::BatchRecorder> recorder;  // train/batch_record.hpp
  if (!record_batches.empty()) {
    recorder.emplace(record_batches, /*append=*/!request.resume.empty());
    request.on_batch = [&recorder](int64_t step, int64_t micro, const train::Batch& batch) {
      recorder->record(step, micro, batch);
    };
  }
  const train::TrainSummary summary = train::train_model(config, *components.registry, components.lookup, request);
  if (summary.numeric_failure) {
    std::cerr << summary.failure_message << "\n";
    return kExitNumeric;
  }
  if (!summary.writer) return kExitOk;  // a multi-process run: rank 0 reports for the job
  std::cout << "run: " << summary.run_dir.string() << "\n"
            << "steps: " << summary.start_step << " -> " << summary.steps_done << " in " << summary.seconds << " s ("
            << static_cast<int64_t>(summary.tokens_per_second) << " tokens/s)\n"
            << "final train loss: " << summary.last_loss << "\n";
  if (summary.last_eval) {
    std::cout << "val loss: " << summary.last_eval->loss << " nats/token, perplexity " << summary.last_eval->perplexity
              << ", " << summary.last_eval->bits_per_byte << " bits/byte\n";
  }
  if (!summary.last_checkpoint.empty()) std::cout << "checkpoint: " << summary.last_checkpoint.string() << "\n";
  return kExitOk;
}

}  // namespace

PATCHBAY_REGISTER_COMMAND({"train", "Train a model from a config (resume with --resume)", run_train});

}  // namespace patchbay::cli
