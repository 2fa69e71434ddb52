// The `patchbay compare` table: one row per configuration (seeds pooled) with n, mean, sample
// std and bootstrap CI of the final validation loss, bits per byte, tokens/s, parameters and
// FLOPs per token, and the delta against a baseline row with its p-value: a paired t-test
// when both rows have the same seeds (n >= 2), else Welch's t-test; and, when the runs scored
// [eval] tasks, the same statistics for each task metric. Written as Markdown, CSV or JSON.
#pragma once

#include <string>
#include <vector>

#include "analysis/run_results.hpp"
#include "analysis/statistics.hpp"

namespace patchbay::analysis {

struct CompareRow {
  std::string label;
  std::string config_id;
  size_t n = 0;
  std::vector<int64_t> seeds;
  double loss_mean = kMissing, loss_std = kMissing;
  Interval loss_ci{kMissing, kMissing};
  double bpb_mean = kMissing, bpb_std = kMissing;
  double tokens_per_second = kMissing;
  double parameters = kMissing;
  double flops_per_token = kMissing;
  bool is_baseline = false;
  double delta = kMissing;  // loss_mean - baseline loss_mean
  std::string test;         // "paired", "welch" or "" (baseline / too few runs)
  double p_value = kMissing;
};

// One [eval] task metric of one configuration (core/train/training_tasks.hpp): its final
// value over the group's seeds, as the loss columns are computed, with the stderr lm-eval
// reports (within one run: over the task's items) averaged over the seeds beside it.
struct TaskMetricRow {
  std::string metric;  // "<task>.<metric>": "kjv_next_verse.acc", "kjv_cloze.perplexity"
  size_t group = 0;    // index of the configuration (CompareTable::rows)
  size_t n = 0;
  std::vector<int64_t> seeds;
  double mean = kMissing, std = kMissing;
  Interval ci{kMissing, kMissing};
  double item_stderr = kMissing;
  double delta = kMissing;  // mean - baseline mean
  std::string test;         // "paired", "welch" or ""
  double p_value = kMissing;
};

struct CompareTable {
  std::vector<CompareRow> rows;
  std::vector<TaskMetricRow> task_rows;  // metric by metric (sorted), configurations in order
  size_t baseline = 0;
  double ci_level = 0.95;
};

// `baseline`: index of the baseline group. Runs without a validation loss are left out of
// the loss statistics (they still count in n only when they have one).
CompareTable build_compare_table(const std::vector<RunGroup>& groups, size_t baseline,
                                 double ci_level = 0.95);

// Markdown: the table, then (when any run scored tasks) the task table. JSON: both ("rows",
// "task_rows"). CSV: the main table; task_metrics_csv the task table (compare_tasks.csv).
std::string to_markdown(const CompareTable& table);
std::string to_csv(const CompareTable& table);
std::string task_metrics_csv(const CompareTable& table);
std::string to_json(const CompareTable& table);

}  // namespace patchbay::analysis
