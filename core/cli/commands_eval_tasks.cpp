// The task side of `patchbay eval` (eval_tasks.hpp): load the checkpoint's model and the
// tokenizer file its run saved, resolve each task (eval/task_lookup.hpp: a YAML file, or a
// shipped task's name), evaluate, print the table, write the results JSON (and --log-samples JSON
// Lines).
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <sstream>
#include <thread>

#include "cli/checkpoint_tokenizer.hpp"
#include "cli/component_lookup.hpp"
#include "cli/eval_tasks.hpp"
#include "config/config_loader.hpp"
#include "data/split.hpp"
#include "data/tokenizer_io.hpp"
#include "eval/task_evaluation.hpp"
#include "eval/task_lookup.hpp"
#include "eval/tokenizer_codec.hpp"
#include "model/encoder_decoder.hpp"
#include "run/atomic_file.hpp"
#include "train/checkpoint.hpp"
#include "train/objective.hpp"
#include "train/train_config.hpp"

namespace patchbay::cli {
namespace {

namespace fs = std::filesystem;

// The largest |a - b| over the per-request log-likelihoods of two sample lists of one task
// (the same items in the same order), and how many were compared.
std::pair<double, int64_t> largest_difference(const std::vector<nlohmann::json>& a,
                                              const std::vector<nlohmann::json>& b) {
  double largest = 0;
  int64_t compared = 0;
  for (size_t i = 0; i < a.size() && i < b.size(); ++i) {
    std::vector<double> x, y;
    if (a[i].contains("loglikelihoods")) {
      x = a[i]["loglikelihoods"].get<std::vector<double>>();
      y = b[i]["loglikelihoods"].get<std::vector<double>>();
    } else if (a[i].contains("loglikelihood")) {
      x = {a[i]["loglikelihood"].get<double>()};
      y = {b[i]["loglikelihood"].get<double>()};
    }
    for (size_t k = 0; k < x.size() && k < y.size(); ++k, ++compared)
      largest = std::max(largest, std::fabs(x[k] - y[k]));
  }
  return {largest, compared};
}

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
  // An encoder-decoder is scored as lm-eval's seq2seq backend scores one (the context to the
  // encoder, the continuation by the decoder from its start token), whatever its objective
  // (seq2seq, span_corruption); a single-stack run's objective (objective.hpp) says whether
  // its model scores text left to right.
  const bool seq2seq = model::model_architecture(config) == "encoder_decoder";
  const std::string objective = train::objective_name(config);
  if (!seq2seq &&
      !train::make_objective(config, train::train_options_from_config(config), tokenizer)
           ->makes_samples())
    throw Error(ErrorKind::kInvalidArgument,
                checkpoint.path().string() + " holds a model trained with train.objective = \"" +
                    objective + "\" (" + train::find_objective(objective).summary +
                    "): task scoring needs a causal model (left-to-right log-likelihoods)");
  auto model = seq2seq
                   ? model::LanguageModel::build_encoder_decoder(
                         model::encoder_decoder_options_from_config(config, tokenizer.vocab_size()),
                         model::component_tables_from_config(config), *components.registry)
                   : model::LanguageModel::build(
                         model::model_options_from_config(config, tokenizer.vocab_size()),
                         model::component_tables_from_config(config), *components.registry);
  std::vector<train::NamedTensor> params;
  for (const model::NamedParameter& p : model->parameters()) params.push_back({p.name, p.tensor});
  checkpoint.load_into(params);
  eval::TextCodec codec = eval::text_codec_of(tokenizer);
  if (seq2seq) {  // lm-eval's prefix token is the EOS for a model without BOS (T5: </s>)
    for (const runtime::SpecialTokenInfo& s : tokenizer.special_tokens())
      if (s.text == "</s>") codec.prefix_token = s.id;
  }
  const int64_t context_limit = seq2seq ? model->encoder_decoder()->options().source_context_length
                                        : model->options().context_length;

  eval::EvalOptions options;
  options.num_fewshot = args.num_fewshot;
  options.limit = args.limit;
  options.batch_size = args.batch_size;
  options.fewshot_seed = args.fewshot_seed;
  options.keep_samples = !args.log_samples.empty();
  options.share_contexts = args.share_contexts;
  std::vector<eval::TaskResult> results;
  std::vector<std::string> cache_lines;  // --compare-context-cache
  nlohmann::json cache_comparison = nlohmann::json::array();
  std::ofstream samples;
  if (options.keep_samples) {
    samples.open(args.log_samples);
    if (!samples)
      throw Error(ErrorKind::kIo, "--log-samples file " + args.log_samples + " cannot be written");
  }
  for (const eval::TaskSpec& spec : specs) {
    std::cerr << "task " << spec.name << " (" << spec.file.string() << ")...\n";
    if (args.compare_context_cache && spec.output_type != eval::OutputType::kGenerateUntil) {
      // Whole rows first, then shared contexts (the reported result), same process and threads.
      eval::EvalOptions whole = options, shared = options;
      whole.share_contexts = false;
      shared.share_contexts = true;
      whole.keep_samples = shared.keep_samples = true;
      // Process CPU time beside wall time: on a shared machine the wall clock mostly measures
      // preemption, CPU seconds (all threads) the work done.
      const std::clock_t whole_start = std::clock();
      const eval::TaskResult reference = eval::evaluate_task(*model, codec, spec, whole);
      const double whole_cpu = static_cast<double>(std::clock() - whole_start) / CLOCKS_PER_SEC;
      const std::clock_t shared_start = std::clock();
      eval::TaskResult result = eval::evaluate_task(*model, codec, spec, shared);
      const double shared_cpu = static_cast<double>(std::clock() - shared_start) / CLOCKS_PER_SEC;
      const auto [largest, compared] = largest_difference(reference.samples, result.samples);
      char line[512];
      std::snprintf(line, sizeof line,
                    "context cache, %s: shared contexts %.3f s wall, %.3f s CPU (%lld tokens "
                    "forwarded, %lld contexts shared) vs whole rows %.3f s wall, %.3f s CPU "
                    "(%lld tokens): %.2fx wall, %.2fx CPU; largest |log-likelihood difference| "
                    "%.2e over %lld requests\n",
                    spec.name.c_str(), result.seconds, shared_cpu,
                    static_cast<long long>(result.scoring.tokens),
                    static_cast<long long>(result.scoring.shared_contexts), reference.seconds,
                    whole_cpu, static_cast<long long>(reference.scoring.tokens),
                    result.seconds > 0 ? reference.seconds / result.seconds : 0.0,
                    shared_cpu > 0 ? whole_cpu / shared_cpu : 0.0, largest,
                    static_cast<long long>(compared));
      cache_lines.push_back(line);
      cache_comparison.push_back({{"task", spec.name},
                                  {"shared_seconds", result.seconds},
                                  {"shared_cpu_seconds", shared_cpu},
                                  {"whole_cpu_seconds", whole_cpu},
                                  {"shared_tokens", result.scoring.tokens},
                                  {"shared_contexts", result.scoring.shared_contexts},
                                  {"whole_seconds", reference.seconds},
                                  {"whole_tokens", reference.scoring.tokens},
                                  {"largest_loglikelihood_difference", largest},
                                  {"requests_compared", compared}});
      if (!options.keep_samples) result.samples.clear();
      results.push_back(std::move(result));
    } else {
      results.push_back(eval::evaluate_task(*model, codec, spec, options));
    }
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
                << " requests had their context cut from the left to fit " << context_limit
                << (seq2seq ? " source tokens (model.source_context_length)\n" : " tokens\n");
    if (r.boundary_mismatches > 0)
      std::cout << r.task << ": " << r.boundary_mismatches
                << " requests tokenise differently across the context/continuation boundary "
                   "(scored as lm-eval does)\n";
  }
  if (!cache_lines.empty()) {
    const char* threads = std::getenv("OMP_NUM_THREADS");
    std::printf("threads: OMP_NUM_THREADS=%s, %u cores\n", threads ? threads : "unset (every core)",
                std::thread::hardware_concurrency());
    for (const std::string& line : cache_lines) std::fputs(line.c_str(), stdout);
  }
  nlohmann::json out = {{"checkpoint", checkpoint.path().string()},
                        {"step", checkpoint.step()},
                        {"fewshot_seed", args.fewshot_seed},
                        {"batch_size", args.batch_size},
                        {"tasks", nlohmann::json::array()}};
  if (args.limit) out["limit"] = *args.limit;
  if (!cache_comparison.empty()) out["context_cache_comparison"] = cache_comparison;
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
