// ZeRO-1 (optimizer-state sharding, REFERENCES.md §3.2) on the parallelism interface:
//   - all parameters, in registration order, form one flat index space of N elements, padded
//     to W * S with S = ceil(N / W); rank r owns elements [r*S, min((r+1)*S, N)) — shards may
//     be uneven (the last rank's may be short or empty of real elements);
//   - the rank's shard is cut at parameter boundaries into pieces: 1-D views into the
//     parameters' own storage, registered with an optimizer of their own (one piece = one
//     optimizer parameter, with its parameter's weight-decay and lr options), so optimizer
//     state exists for the shard only;
//   - after backward: gradients flattened, reduce-scattered (AVG) — each rank receives the
//     averaged gradient of its shard only — and handed to the pieces;
//   - the optimizer updates the pieces (in place in the parameters), then the shards are
//     all-gathered so every rank holds every updated parameter.
// Per-element math is that of plain data parallelism, so the result equals it up to the
// reduction order; this holds for element-wise optimizers (adamw, sgd, lion), and the trainer
// refuses others (adafactor factors a matrix's second moment by rows and columns).
// full_state() / restore_full_state() translate the sharded optimizer state to and from the
// names and shapes an unsharded optimizer uses ("exp_avg/<parameter>"), so checkpoints do not
// depend on the world size.
#pragma once

#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "runtime/optimizer_handle.hpp"
#include "runtime/parallelism_handle.hpp"

namespace patchbay::parallel {

class Zero1 {
 public:
  // `make_optimizer` creates an empty optimizer of the configured kind.
  Zero1(runtime::ParallelismHandle& group,
        const std::vector<runtime::OptimizerHandle::Parameter>& parameters,
        const std::function<std::unique_ptr<runtime::OptimizerHandle>()>& make_optimizer);

  // Reduce-scatter (AVG) of the parameters' gradients into the pieces' gradients.
  void reduce_scatter_gradients();
  // The shard's pieces (their .grad() holds this rank's averaged gradient after the above).
  const std::vector<engine::Tensor>& pieces() const { return pieces_; }
  // Optimizer step on the shard, then all-gather of the parameters.
  void step(double lr);
  // The shard's optimizer (its parameters are pieces()): the trainer steps it with the clip
  // factor folded in (train::optimizer_step_scaled), then calls all_gather_parameters().
  runtime::OptimizerHandle& optimizer() { return *optimizer_; }
  void all_gather_parameters();

  // Collective (every rank calls it): the optimizer state as an unsharded optimizer names it.
  std::vector<runtime::OptimizerHandle::StateTensor> full_state();
  // From unsharded state (a checkpoint of any world size): this rank's pieces of it.
  void restore_full_state(const std::map<std::string, engine::Tensor>& saved);

  int64_t shard_size() const { return shard_; }
  int64_t total_elements() const { return total_; }

 private:
  struct Piece {
    size_t parameter;      // index into parameters_
    int64_t param_offset;  // first element inside the flattened parameter
    int64_t shard_offset;  // first element inside this rank's shard
    int64_t length;
    std::string name;  // "<parameter name>@<param_offset>"
  };
  engine::Tensor flat_shard_of(
      const std::function<engine::Tensor(size_t piece)>& piece_values) const;

  runtime::ParallelismHandle& group_;
  std::vector<runtime::OptimizerHandle::Parameter> parameters_;
  std::vector<int64_t> offsets_;  // flat offset of each parameter
  int64_t total_ = 0;
  int64_t shard_ = 0;
  std::vector<Piece> piece_info_;
  std::vector<engine::Tensor> pieces_;
  std::unique_ptr<runtime::OptimizerHandle> optimizer_;
};

}  // namespace patchbay::parallel
