// Reading finished runs for reports: a run directory's config.toml, metrics.jsonl and
// model_size.json (written by `patchbay train`), and grouping runs by configuration with the
// seed removed. A sweep directory (one with ledger.json) stands for its finished jobs, in the
// sweep's order.
#pragma once

#include <cstdint>
#include <filesystem>
#include <limits>
#include <map>
#include <string>
#include <utility>
#include <vector>

namespace patchbay::analysis {

inline constexpr double kMissing = std::numeric_limits<double>::quiet_NaN();

struct RunResult {
  std::filesystem::path dir;
  int64_t seed = 0;
  std::string config_id;  // hash of the config without seed, name and out_dir
  std::map<std::string, std::string>
      flat;                          // config key path -> value as TOML text (same exclusions)
  double final_val_loss = kMissing;  // last evaluation
  double final_val_bpb = kMissing;
  double tokens_per_second = kMissing;  // mean over logged steps after the first
  double parameters = kMissing;         // model_size.json
  double flops_per_token = kMissing;
  double tokens = kMissing;                           // tokens trained at the last logged step
  std::vector<std::pair<int64_t, double>> val_curve;  // (step, val_loss)
  // [eval] tasks (core/train/training_tasks.hpp): "<task>.<metric>" -> value at the last
  // evaluation that scored tasks, and the stderr lm-eval defines for it (absent when none).
  std::map<std::string, double> task_metrics;
  std::map<std::string, double> task_stderr;
};

// Reads one run directory. Throws Error(kNotFound) when it holds no config.toml.
RunResult read_run(const std::filesystem::path& dir, const std::string& seed_key = "run.seed");

// Expands sweep directories into their finished jobs' run directories (ledger order) and
// reads every run. `skipped` gets a line for each sweep job that is not finished.
std::vector<RunResult> collect_runs(const std::vector<std::filesystem::path>& paths,
                                    std::vector<std::string>* skipped = nullptr);

struct RunGroup {
  // The config keys that differ between groups, less those a differing component `kind`
  // implies: "model.attention.kind=\"mqa\"", not also every key of each kind's own table
  // (model.attention.mqa.kv_heads=..., model.attention.dense.causal=<unset>, ...) nor the
  // run.plugin_paths that came with it. Keys of a kind's table still show when they differ
  // between groups of that same kind (an axis over model.attention.sparse.block_size).
  std::string label;
  std::string full_label;  // every key that differs between groups (compare --full-labels)
  std::string config_id;
  std::vector<RunResult> runs;
};

// Groups by config_id, in order of first appearance; labels name the differing keys.
std::vector<RunGroup> group_runs(const std::vector<RunResult>& runs);

}  // namespace patchbay::analysis
