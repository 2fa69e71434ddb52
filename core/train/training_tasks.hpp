// Downstream tasks scored during training ([eval] tasks; docs/evaluation.md "During training").
// At the run's evaluation steps (train.eval_every and the last step; [eval] task_every thins
// them) every task is scored as `patchbay eval RUN --tasks` scores it (core/eval), and its
// metrics join that step's evaluation record in metrics.jsonl:
//   "task.<task>.<metric>": value            acc, acc_norm, exact_match,<filter>, perplexity, ...
//   "task.<task>.<metric>_stderr": stderr    lm-eval's stderr of the mean, where it defines one
//   "task.<task>.items": documents scored,  "task_seconds": wall time of all tasks
// The task files are read, and their items built, once when the run starts: a bad name, file
// or document is refused then — and by `patchbay config check` and `patchbay sweep` before any
// job runs (check_training_tasks) — naming eval.tasks[i].
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "config/config_document.hpp"
#include "eval/task_docs.hpp"
#include "eval/token_requests.hpp"
#include "model/language_model.hpp"

namespace patchbay::train {

struct TrainingTaskSettings {
  std::vector<std::string> entries;  // eval.tasks: "name", "file.yaml", "name:N" (N documents)
  int64_t limit = 0;                 // eval.task_limit: documents per task (0: all)
  int64_t every = 0;                 // eval.task_every: updates between task evaluations (0: each)
  int64_t num_fewshot = -1;          // eval.task_num_fewshot (-1: each task file's)
  int64_t batch_size = 32;           // eval.task_batch_size: request rows per forward
  uint64_t fewshot_seed = 1234;      // eval.task_fewshot_seed (lm-eval's default)
};

// From a validated config ([eval] with defaults).
TrainingTaskSettings training_task_settings(const config::ResolvedConfig& config);

struct TaskEvaluation {
  nlohmann::json fields = nlohmann::json::object();  // the metrics.jsonl fields above
  std::string summary;  // one log line: "kjv_next_verse acc 0.3100 ± 0.0465, acc_norm ..."
};

class TrainingTasks {
 public:
  // Resolves every entry (eval/task_lookup.hpp), reads the task file and builds its items.
  // Throws Error naming eval.tasks[i] and what was wrong; two entries with the same task name
  // are refused (their metrics would share keys).
  explicit TrainingTasks(const TrainingTaskSettings& settings);

  bool empty() const { return tasks_.empty(); }
  // Whether an evaluation at update `step` scores the tasks too.
  bool due(int64_t step, bool last) const;
  TaskEvaluation evaluate(model::LanguageModel& model, const eval::TextCodec& codec) const;

 private:
  TrainingTaskSettings settings_;
  std::vector<eval::TaskRequests> tasks_;
};

// What `patchbay config check` and `patchbay sweep` run before training: [eval] tasks resolve,
// read and build (the TrainingTasks constructor), and a model that is not causal is refused
// when there are any (task scoring reads left-to-right log-likelihoods).
void check_training_tasks(const config::ResolvedConfig& config);

}  // namespace patchbay::train
