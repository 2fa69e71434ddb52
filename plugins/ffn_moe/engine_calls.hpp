// Host ops that patchbay::Tensor does not wrap (topk, scatter_add), called through the ops
// table with the same error handling as the wrapper.
#pragma once

#include <patchbay/tensor.hpp>
#include <utility>

namespace patchbay_ffn_moe {

// values, indices (int64) of the k largest entries along `dim`.
inline std::pair<patchbay::Tensor, patchbay::Tensor> topk(const patchbay::Tensor& x, int64_t k,
                                                          int64_t dim) {
  const pb_ops_table* ops = x.ops();
  pb_tensor* values = nullptr;
  pb_tensor* indices = nullptr;
  patchbay::check_ops_status(ops, ops->topk(x.handle(), k, dim, 1, &values, &indices), "topk");
  return {patchbay::Tensor(ops, values), patchbay::Tensor(ops, indices)};
}

// self with src added at index along dim (PyTorch scatter_add, out of place).
inline patchbay::Tensor scatter_add(const patchbay::Tensor& self, int64_t dim,
                                    const patchbay::Tensor& index, const patchbay::Tensor& src) {
  const pb_ops_table* ops = self.ops();
  pb_tensor* out = nullptr;
  patchbay::check_ops_status(
      ops, ops->scatter_add(self.handle(), dim, index.handle(), src.handle(), &out), "scatter_add");
  return patchbay::Tensor(ops, out);
}

}  // namespace patchbay_ffn_moe
