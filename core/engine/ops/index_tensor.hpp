// Helpers shared by the indexing ops (embedding, cross_entropy, gather_scatter, sort_topk):
// index-tensor checks, the i32/i64 switch into the templated kernels of kernels/indexing,
// and the out-of-range message that names the value, its coordinates and the valid range.
#pragma once

#include <cstdint>
#include <string>

#include "common/error.hpp"
#include "engine/tensor.hpp"
#include "patchbay/kernels/cross_entropy.hpp"
#include "patchbay/kernels/index_check.hpp"

namespace patchbay::engine::detail {

inline void check_index_tensor(const Tensor& index, const char* op, const char* name) {
  if (!index.defined())
    throw Error(ErrorKind::kInvalidArgument, std::string(op) + ": " + name + " is undefined");
  if (index.dtype() != DType::kI32 && index.dtype() != DType::kI64)
    throw Error(ErrorKind::kInvalidArgument, std::string(op) + ": expected " + name +
                                                 " of dtype i32 or i64, found " + index.str());
}

// Calls f(int32_t{}) or f(int64_t{}) by the index tensor's dtype.
template <class F>
decltype(auto) visit_index_type(const Tensor& index, F&& f) {
  if (index.dtype() == DType::kI32) return f(int32_t{});
  return f(int64_t{});
}

// "[1, 4]": the coordinates of flat (row-major) position `flat` in `shape`.
inline std::string coordinates_str(int64_t flat, const Shape& shape) {
  Shape coords(shape.size());
  for (size_t d = shape.size(); d-- > 0;) {
    coords[d] = shape[d] == 0 ? 0 : flat % shape[d];
    flat = shape[d] == 0 ? 0 : flat / shape[d];
  }
  return shape_str(coords);
}

// Throws when `position` >= 0: "<op>: <name> value V at [c...] of <tensor> is out of range;
// expected <range>. <advice>".
template <class Index>
void throw_if_out_of_range(int64_t position, const Index* values, const Tensor& index,
                           const char* op, const char* name, const std::string& expected,
                           const std::string& advice) {
  if (position < 0) return;
  throw Error(ErrorKind::kInvalidArgument, std::string(op) + ": " + name + " value " +
                                               std::to_string(int64_t(values[position])) + " at " +
                                               coordinates_str(position, index.shape()) + " of " +
                                               index.str() + " is out of range; expected " +
                                               expected + (advice.empty() ? "" : ". ") + advice);
}

// Refuses the first entry of `index` (host values `values`) outside [0, limit) (the size of
// dim `dim` of gather's input / scatter_add's self), naming it: every device's check.
template <class Index>
void check_index_values_in_range(const Index* values, const Tensor& index, int64_t limit,
                                 int64_t dim, const char* op) {
  const int64_t bad = kernels::first_index_out_of_range(values, index.numel(), limit);
  throw_if_out_of_range(
      bad, values, index, op, "index",
      "0 <= index < " + std::to_string(limit) + " (the size of dim " + std::to_string(dim) + ")",
      "");
}

// Refuses the first target of `targets` (host values `values`) that is neither a class in
// [0, classes) nor ignore_index, naming it: the check every device's cross_entropy runs first.
template <class Index>
void check_cross_entropy_targets(const Index* values, const Tensor& targets, int64_t classes,
                                 int64_t ignore_index) {
  const int64_t bad = kernels::first_invalid_target(values, targets.numel(), classes, ignore_index);
  throw_if_out_of_range(bad, values, targets, "cross_entropy", "target",
                        "0 <= target < " + std::to_string(classes) +
                            " (V, the last dim of the logits) or ignore_index " +
                            std::to_string(ignore_index),
                        "");
}

}  // namespace patchbay::engine::detail
