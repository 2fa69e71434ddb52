// `patchbay eval RUN --tasks NAME|FILE[,...]`: downstream tasks on a checkpoint, scored as
// lm-evaluation-harness scores them (core/eval). commands_eval.cpp hands over here when
// --tasks is given; without it, `patchbay eval` keeps its loss/perplexity/bits-per-byte job.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include "cli/command.hpp"

namespace patchbay::cli {

struct EvalTasksArgs {
  std::string checkpoint;  // a .safetensors file or a run directory (its latest)
  std::string tasks;       // comma-separated names (configs/tasks/<name>.yaml) or YAML files
  std::optional<int64_t> num_fewshot, limit;
  int64_t batch_size = 32;
  uint64_t fewshot_seed = 1234;
  std::string log_samples;  // JSON Lines file, or empty
  std::string output;       // results JSON; default <run>/eval_tasks.json
  bool share_contexts = true;          // --no-context-cache: every request forwarded whole
  bool compare_context_cache = false;  // --compare-context-cache: both, timed, in this run
};

int run_eval_tasks(const EvalTasksArgs& args, const GlobalOptions& global);

}  // namespace patchbay::cli
