// Tensor parallelism (Megatron-style, REFERENCES.md §3.3) on the parallelism interface, the
// trainer's side. The layers split themselves (plugins/attention_dense, plugins/ffn_mlp, through
// pb_layer_context 1.1); this class gives them the group and keeps checkpoints whole:
//   - construction installs the group's SUM all-reduce as the engine's tensor-parallel
//     collective (engine/tensor_parallel.hpp: the f / g ops of the ops table, version 9);
//     destruction removes it;
//   - every rank trains on the same full batch; a parameter a layer marked partitioned holds
//     this rank's slice (Layout below), every other one (embeddings, norms, head, the biases
//     of row-parallel projections) is replicated. Replicated gradients are identical on every
//     rank by construction: they depend only on activations after a g (sum, the same on every
//     rank) and on gradients after an f (summed over the group), so they need no all-reduce;
//   - gather() (collective) rebuilds a full tensor from the ranks' slices for checkpoints;
//     slice() cuts this rank's part out of a full one on resume, so a checkpoint written on W
//     ranks resumes on any count that divides the split dims (1 included);
//   - the optimizer state follows its parameter: element-wise state (numel = the parameter's)
//     is gathered and sliced like it; other state (a step count) is the same on every rank.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "engine/tensor.hpp"
#include "runtime/optimizer_handle.hpp"
#include "runtime/parallelism_handle.hpp"

namespace patchbay::parallel {

// How a partitioned parameter is laid out: the full tensor's dim `dim` is cut into `stride`
// equal blocks, each into W slices; rank r holds slice r of every block, in block order.
struct ShardLayout {
  int64_t dim = 0;
  int64_t stride = 1;
};

class TensorParallel {
 public:
  // `partitioned`: the parameters the layers marked, by model name.
  TensorParallel(runtime::ParallelismHandle& group, std::map<std::string, ShardLayout> partitioned);
  ~TensorParallel();
  TensorParallel(const TensorParallel&) = delete;
  TensorParallel& operator=(const TensorParallel&) = delete;

  int64_t rank() const;
  int64_t world_size() const;
  bool partitioned(const std::string& name) const { return partitioned_.count(name) != 0; }

  // Collective: the full tensor of parameter `name` from this rank's `local` slice (a fresh
  // contiguous tensor); `local` itself (contiguous) for a replicated parameter.
  engine::Tensor gather(const std::string& name, const engine::Tensor& local) const;
  // This rank's slice (fresh, contiguous) of parameter `name`'s `full` tensor; `full` for a
  // replicated one. Throws Error(kInvalidArgument) when the split dim does not divide.
  engine::Tensor slice(const std::string& name, const engine::Tensor& full) const;

  // Collective: optimizer state under its unsharded shapes ("exp_avg/<parameter>" holds the
  // full tensor), from this rank's state; `parameters` gives each parameter's local shape.
  std::vector<runtime::OptimizerHandle::StateTensor> full_state(
      const std::vector<runtime::OptimizerHandle::StateTensor>& local,
      const std::map<std::string, engine::Tensor>& parameters) const;
  // This rank's state from unsharded `saved` state, shaped like `current` (the optimizer's).
  std::map<std::string, engine::Tensor> local_state(
      const std::map<std::string, engine::Tensor>& saved,
      const std::vector<runtime::OptimizerHandle::StateTensor>& current,
      const std::map<std::string, engine::Tensor>& parameters) const;

 private:
  // The parameter an optimizer state name "<prefix>/<parameter>" belongs to when the state is
  // element-wise over a partitioned parameter; empty otherwise.
  std::string partitioned_owner(const std::string& state_name, int64_t numel,
                                const std::map<std::string, engine::Tensor>& parameters) const;

  runtime::ParallelismHandle& group_;
  std::map<std::string, ShardLayout> partitioned_;
};

}  // namespace patchbay::parallel
