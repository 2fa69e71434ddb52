// The task side of `patchbay eval` (eval_tasks.hpp): load the checkpoint's model and the
// tokenizer file its run saved, resolve each task (eval/task_lookup.hpp: a YAML file, or a
// shipped task's name), evaluate, print the table, write the results JSON (and --log-samples JSON
// Lines).
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <sstream>

#include "cli/checkpoint_tokenizer.hpp"
#include "cli/component_lookup.hpp"
#include "cli/eval_tasks.hpp"
#include "config/config_loader.hpp"
#include "data/split.hpp"
#include "data/tokenizer_io.hpp"
#include "eval/task_evaluation.hpp"
#include "eval/task_lookup.hpp"
#include "eval/tokenizer_codec.hpp"
#include "run/atomic_file.hpp"
#include "train/checkpoint.hpp"
#include "train/objective.hpp"
#include "train/train_config.hpp"

namespace patchbay::cli {
namespace {

namespace fs = std::filesystem;

std::vector<std::string> split_commas(const std::string& s) {
  std::vector<std::string> out;
  std::stringstream in(s);
  for (std::string part; std::getline(in, part, ',');)
    if (!part.empty()) out.push_back(part);
  return out;
}

}  // namespace

int run_eval_tasks(const EvalTasksArgs& args, const GlobalOptions& global) {
  const train::Checkpoint checkpoint = train::load_checkpoint(args.checkpoint);
  config::ResolvedConfig config = config::load_config_text(
      checkpoint.config_text(), checkpoint.path().string() + " (stored config)");
  const ComponentLookup components =
      make_component_lookup(global, config, recorded_plugins(checkpoint));
  if (!components.registry) throw Error(ErrorKind::kInternal, components.unavailable_reason);
  train::validate_training_config(config, components.lookup);
  std::vector<eval::TaskSpec> specs;  // all read before any scoring: a bad file fails fast
  for (const std::string& t : split_commas(args.tasks))
    specs.push_back(eval::load_task_file(eval::resolve_task(t)));
  if (specs.empty()) throw Error(ErrorKind::kInvalidArgument, "--tasks names no task");

  const fs::path tokenizer_file = tokenizer_file_of(checkpoint);
  const uint64_t hash = data::fnv1a64(data::read_text_file(tokenizer_file));
  char hex[17];
  std::snprintf(hex, sizeof(hex), "%016llx", static_cast<unsigned long long>(hash));
  const std::string& recorded = checkpoint.meta(train::kMetaTokenizerHash);
  if (recorded != std::to_string(hash) && recorded != hex)
    std::cerr << "warning: tokenizer file " << tokenizer_file.string()
              << " differs from the one the run recorded\n";
  data::TokenizerSettings settings;
  settings.kind = train::config_string(config, "tokenizer.kind");
  const runtime::TokenizerHandle tokenizer =
      data::load_tokenizer(*components.registry, tokenizer_file, settings);
  // The run's objective (objective.hpp) says whether its model scores text left to right.
  const std::string objective = train::objective_name(config);
  if (!train::make_objective(config, train::train_options_from_config(config), tokenizer)
           ->makes_samples())
    throw Error(ErrorKind::kInvalidArgument,
                checkpoint.path().string() + " holds a model trained with train.objective = \"" +
                    objective + "\" (" + train::find_objective(objective).summary +
                    "): task scoring needs a causal model (left-to-right log-likelihoods)");
  auto model = model::LanguageModel::build(
      model::model_options_from_config(config, tokenizer.vocab_size()),
      model::component_tables_from_config(config), *components.registry);
  std::vector<train::NamedTensor> params;
  for (const model::NamedParameter& p : model->parameters()) params.push_back({p.name, p.tensor});
  checkpoint.load_into(params);
  const eval::TextCodec codec = eval::text_codec_of(tokenizer);

  eval::EvalOptions options;
  options.num_fewshot = args.num_fewshot;
  options.limit = args.limit;
  options.batch_size = args.batch_size;
  options.fewshot_seed = args.fewshot_seed;
  options.keep_samples = !args.log_samples.empty();
  std::vector<eval::TaskResult> results;
  std::ofstream samples;
  if (options.keep_samples) {
    samples.open(args.log_samples);
    if (!samples)
      throw Error(ErrorKind::kIo, "--log-samples file " + args.log_samples + " cannot be written");
  }
  for (const eval::TaskSpec& spec : specs) {
    std::cerr << "task " << spec.name << " (" << spec.file.string() << ")...\n";
    results.push_back(eval::evaluate_task(*model, codec, spec, options));
    for (nlohmann::json& s : results.back().samples) {
      s["task"] = spec.name;
      samples << s.dump() << "\n";
    }
    results.back().samples.clear();
  }

  std::cout << "checkpoint: " << checkpoint.path().string() << " (step " << checkpoint.step()
            << ")\n"
            << eval::results_table(results);
  for (const eval::TaskResult& r : results) {
    if (r.output_type == eval::OutputType::kGenerateUntil)
      std::printf("%s: %lld prompts, %lld tokens generated greedily, %.2f s\n", r.task.c_str(),
                  static_cast<long long>(r.scoring.requests),
                  static_cast<long long>(r.scoring.tokens), r.seconds);
    else
      std::printf(
          "%s: %lld requests as %lld rows in %lld batches, %lld tokens forwarded, %.2f s (%.0f "
          "tokens/s)\n",
          r.task.c_str(), static_cast<long long>(r.scoring.requests),
          static_cast<long long>(r.scoring.rows), static_cast<long long>(r.scoring.batches),
          static_cast<long long>(r.scoring.tokens), r.seconds,
          r.seconds > 0 ? static_cast<double>(r.scoring.tokens) / r.seconds : 0.0);
    if (r.truncated_requests > 0)
      std::cout << r.task << ": " << r.truncated_requests
                << " requests had their context cut from the left to fit "
                << model->options().context_length << " tokens\n";
    if (r.boundary_mismatches > 0)
      std::cout << r.task << ": " << r.boundary_mismatches
                << " requests tokenise differently across the context/continuation boundary "
                   "(scored as lm-eval does)\n";
  }
  nlohmann::json out = {{"checkpoint", checkpoint.path().string()},
                        {"step", checkpoint.step()},
                        {"fewshot_seed", args.fewshot_seed},
                        {"batch_size", args.batch_size},
                        {"tasks", nlohmann::json::array()}};
  if (args.limit) out["limit"] = *args.limit;
  for (const eval::TaskResult& r : results) out["tasks"].push_back(eval::task_result_json(r));
  const fs::path output = args.output.empty()
                              ? checkpoint.path().parent_path().parent_path() / "eval_tasks.json"
                              : fs::path(args.output);
  run::write_text_atomically(output, out.dump(2) + "\n");
  std::cout << "results: " << output.string() << "\n";
  if (options.keep_samples) std::cout << "samples: " << args.log_samples << "\n";
  return kExitOk;
}

}  // namespace patchbay::cli
