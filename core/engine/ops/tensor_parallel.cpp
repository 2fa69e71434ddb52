// tp_copy_to_region / tp_reduce_from_region (engine/tensor_parallel.hpp): two autograd nodes
// around the installed all-reduce. The summed tensors are fresh contiguous copies, so the
// all-reduce never writes into a tensor an op returned earlier or a gradient still in use.
#include "engine/tensor_parallel.hpp"

#include <utility>

#include "engine/autograd.hpp"

namespace patchbay::engine {
namespace {

TensorParallelAllReduce& installed() {
  static TensorParallelAllReduce all_reduce;
  return all_reduce;
}

// A fresh contiguous copy of x summed over the group (x itself when there is no group).
Tensor summed(const Tensor& x) {
  if (!installed()) return x;
  Tensor copy = x.clone();  // fresh and contiguous
  installed()(copy);
  return copy;
}

}  // namespace

TensorParallelAllReduce set_tensor_parallel_all_reduce(TensorParallelAllReduce all_reduce) {
  return std::exchange(installed(), std::move(all_reduce));
}

bool tensor_parallel_installed() { return static_cast<bool>(installed()); }

Tensor tp_copy_to_region(const Tensor& x) {
  Tensor out = x.detach();  // same storage, a node of its own
  record_op("tp_copy_to_region", {x}, {&out},
            [](const std::vector<Tensor>& grads) { return std::vector<Tensor>{summed(grads[0])}; });
  return out;
}

Tensor tp_reduce_from_region(const Tensor& x) {
  Tensor out;
  {
    NoGradGuard no_grad;
    out = installed() ? summed(x) : x.detach();
  }
  record_op("tp_reduce_from_region", {x}, {&out},
            [](const std::vector<Tensor>& grads) { return std::vector<Tensor>{grads[0]}; });
  return out;
}

}  // namespace patchbay::engine
