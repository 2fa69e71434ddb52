// One training process's place in a multi-process run, as the trainer uses it:
//   - the process group from [parallelism] (parallel_config.hpp) or, without that table, a
//     world of one that needs no plugin;
//   - rank-0 I/O policy: writer() is true on rank 0 only; every file of the run directory
//     (config, logs, metrics, samples, checkpoints) is written by the writer;
//   - batch shards: rank r trains on rows [r*B/W, (r+1)*B/W) of every global batch of B rows
//     (B must be a multiple of W, so each rank's mean loss has equal weight and the average of
//     the ranks' gradients is exactly the gradient of the full batch's mean loss);
//   - check_agreement: at start every rank hashes its resolved config and plugin set, the
//     hashes are all-gathered, and a rank that differs from rank 0 is named in the error
//     every rank raises (so all ranks stop together, none waits in a collective);
//   - fail(): ends every rank of the job with a message naming this rank and the cause
//     (the plugin's abort_job: MPI_Abort), so an error on one rank never leaves the others
//     waiting in a collective.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "config/config_document.hpp"
#include "config/schema_registry.hpp"
#include "engine/tensor.hpp"
#include "parallel/parallel_config.hpp"
#include "runtime/parallelism_handle.hpp"
#include "runtime/registry.hpp"

namespace patchbay::parallel {

class ParallelRun {
 public:
  // A world of one, no plugin.
  ParallelRun() = default;
  // From [parallelism]; a world of one when the config has no such table.
  static std::unique_ptr<ParallelRun> from_config(const config::ResolvedConfig& config,
                                                  runtime::Registry& registry,
                                                  const config::SchemaRegistry& schema,
                                                  const config::ComponentSchemaLookup& lookup);

  int64_t rank() const { return group_ ? group_->rank() : 0; }
  int64_t world_size() const { return group_ ? group_->world_size() : 1; }
  bool distributed() const { return world_size() > 1; }
  bool writer() const { return rank() == 0; }
  pb_parallel_strategy strategy() const { return group_ ? group_->strategy() : PB_PARALLEL_SINGLE; }
  const ParallelOptions& options() const { return options_; }
  runtime::ParallelismHandle& group();  // throws when there is no group

  // Rows [rank*B/W, (rank+1)*B/W) of a [B, ...] tensor (a view). Throws unless W divides B.
  engine::Tensor shard_rows(const engine::Tensor& global) const;
  // Throws Error naming the first rank whose config or plugin set differs from rank 0's.
  void check_agreement(const std::string& config_text, const std::string& plugin_set) const;
  // Copies rank 0's values into every rank's tensors (start of a run: identical replicas).
  void broadcast_from_writer(std::vector<engine::Tensor>& tensors) const;
  // The mean over ranks of each value (f32 on the wire).
  std::vector<double> average(const std::vector<double>& values) const;
  // The sum over ranks of one double, exact to double rounding and the same on every rank
  // (the values are all-gathered as bit patterns and added in rank order).
  double sum(double value) const;
  void barrier() const;
  // Ends every rank (distributed) with the message; in a world of one it only returns.
  void fail(int exit_code, const std::string& message) const;

 private:
  ParallelOptions options_;
  std::unique_ptr<runtime::ParallelismHandle> group_;
};

}  // namespace patchbay::parallel
