// One task evaluated end to end: task file -> items (task_docs) -> token requests
// (token_requests) -> scores (request_scorer) -> per-item metrics and their aggregates
// (answer_metrics), with an optional per-item record for --log-samples.
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "eval/request_scorer.hpp"
#include "eval/task_docs.hpp"
#include "eval/task_spec.hpp"
#include "eval/token_requests.hpp"
#include "model/language_model.hpp"

namespace patchbay::eval {

struct EvalOptions {
  std::optional<int64_t> num_fewshot;  // overrides the task file's
  std::optional<int64_t> limit;        // first N docs
  int64_t batch_size = 32;
  uint64_t fewshot_seed = 1234;  // lm-eval's default --fewshot_seed
  bool keep_samples = false;
  // Score the choices of an item from one prefill of their shared context (request_scorer.hpp);
  // false: every request forwarded whole (`patchbay eval --compare-context-cache` times both).
  bool share_contexts = true;
};

struct MetricResult {
  std::string name;  // "acc", "acc_norm", "exact_match,strict-match", ...
  double value = 0;
  double stderr_value = 0;  // NaN when not defined
};

struct TaskResult {
  std::string task;
  std::string file;
  OutputType output_type = OutputType::kMultipleChoice;
  int64_t num_fewshot = 0;
  int64_t items = 0;
  std::vector<MetricResult> metrics;
  int64_t truncated_requests = 0;   // contexts cut from the left to fit the model
  int64_t boundary_mismatches = 0;  // whole-string tokenisation differed at the context boundary
  ScoringStats scoring;
  double seconds = 0;
  std::vector<nlohmann::json> samples;  // per item, when keep_samples
};

TaskResult evaluate_task(model::LanguageModel& model, const TextCodec& codec, const TaskSpec& spec,
                         const EvalOptions& options);
// The same over items built beforehand (build_task_requests; options.num_fewshot, limit and
// fewshot_seed are then the ones they were built with and are not read again): training builds
// its tasks' items once and scores them at every evaluation.
TaskResult evaluate_task_requests(model::LanguageModel& model, const TextCodec& codec,
                                  const TaskRequests& requests, const EvalOptions& options);

// {"task", "output_type", "num_fewshot", "items", "metrics": {name: value, name_stderr: ...},
//  "truncated_requests", "boundary_mismatches", "rows", "batches", "tokens", "seconds"}
nlohmann::json task_result_json(const TaskResult& result);
// A fixed-width table: task, n-shot, metric, value, ± stderr, items.
std::string results_table(const std::vector<TaskResult>& results);

}  // namespace patchbay::eval
