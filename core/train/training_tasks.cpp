// [eval] tasks during training (training_tasks.hpp).
#include "train/training_tasks.hpp"

#include <chrono>
#include <cmath>
#include <cstdio>
#include <set>

#include "common/error.hpp"
#include "eval/task_evaluation.hpp"
#include "eval/task_lookup.hpp"
#include "eval/task_spec.hpp"
#include "train/train_config.hpp"

namespace patchbay::train {

TrainingTaskSettings training_task_settings(const config::ResolvedConfig& config) {
  TrainingTaskSettings s;
  if (const toml::node* node = config.find("eval.tasks"))
    if (const toml::array* list = node->as_array())
      for (const toml::node& item : *list)
        if (const auto text = item.value<std::string>()) s.entries.push_back(*text);
  s.limit = config_int(config, "eval.task_limit");
  s.every = config_int(config, "eval.task_every");
  s.num_fewshot = config_int(config, "eval.task_num_fewshot");
  s.batch_size = config_int(config, "eval.task_batch_size");
  s.fewshot_seed = static_cast<uint64_t>(config_int(config, "eval.task_fewshot_seed"));
  return s;
}

TrainingTasks::TrainingTasks(const TrainingTaskSettings& settings) : settings_(settings) {
  std::set<std::string> names;
  for (size_t i = 0; i < settings.entries.size(); ++i) {
    const std::string where =
        "eval.tasks[" + std::to_string(i) + "] = \"" + settings.entries[i] + "\"";
    try {
      const eval::TaskEntry entry = eval::parse_task_entry(settings.entries[i]);
      const eval::TaskSpec spec = eval::load_task_file(eval::resolve_task(entry.task));
      std::optional<int64_t> limit = entry.limit;
      if (!limit && settings.limit > 0) limit = settings.limit;
      std::optional<int64_t> shots;
      if (settings.num_fewshot >= 0) shots = settings.num_fewshot;
      tasks_.push_back(eval::build_task_requests(spec, shots, limit, settings.fewshot_seed));
    } catch (const Error& e) {
      throw Error(e.kind(), where + ": " + e.what());
    }
    if (!names.insert(tasks_.back().spec.name).second)
      throw Error(ErrorKind::kInvalidArgument,
                  where + ": task '" + tasks_.back().spec.name +
                      "' is named twice in eval.tasks; name each task once");
  }
}

bool TrainingTasks::due(int64_t step, bool last) const {
  return !tasks_.empty() && (settings_.every == 0 || step % settings_.every == 0 || last);
}

TaskEvaluation TrainingTasks::evaluate(model::LanguageModel& model,
                                       const eval::TextCodec& codec) const {
  const auto start = std::chrono::steady_clock::now();
  eval::EvalOptions options;
  options.batch_size = settings_.batch_size;
  TaskEvaluation out;
  for (const eval::TaskRequests& requests : tasks_) {
    const eval::TaskResult result = eval::evaluate_task_requests(model, codec, requests, options);
    const std::string prefix = "task." + result.task + ".";
    out.fields[prefix + "items"] = result.items;
    out.summary += (out.summary.empty() ? "" : "; ") + result.task;
    for (const eval::MetricResult& m : result.metrics) {
      out.fields[prefix + m.name] = m.value;
      char text[128];
      const char* format = std::fabs(m.value) < 1e5 ? " %s %.4f" : " %s %.4g";  // perplexities
      std::snprintf(text, sizeof text, format, m.name.c_str(), m.value);
      out.summary += text;
      if (!std::isnan(m.stderr_value)) {
        out.fields[prefix + m.name + "_stderr"] = m.stderr_value;
        std::snprintf(text, sizeof text, " ± %.4f", m.stderr_value);
        out.summary += text;
      }
    }
  }
  out.fields["task_seconds"] =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  return out;
}

void check_training_tasks(const config::ResolvedConfig& config) {
  const TrainingTasks tasks(training_task_settings(config));
  if (tasks.empty()) return;
  if (const toml::node* causal = config.find("model.causal"))
    if (causal->value<bool>() == false)
      throw Error(ErrorKind::kInvalidArgument,
                  "eval.tasks: task scoring reads left-to-right log-likelihoods, and "
                  "model.causal = false builds a bidirectional model; set eval.tasks = [] for it");
}

}  // namespace patchbay::train
