// CPU iteration helper for kernels over N operands that share one logical shape but have
// their own element strides (broadcast dims have stride 0, views any stride). Adjacent dims
// that are contiguous for every operand are merged first, so a contiguous tensor becomes one
// long row; rows are then cut into blocks of at most kBlock elements and the (row, block)
// pairs are shared among OpenMP threads.
#pragma once

#include <algorithm>
#include <array>
#include <cstdint>
#include <stdexcept>
#include <vector>

#include "engine/tensor.hpp"

namespace patchbay::engine::loops {

// Calls row(offsets, count, inner_strides): `count` elements starting at element offsets
// offsets[i] of operand i, advancing by inner_strides[i]. Runs rows in parallel when the
// tensor is large; `row` must therefore only write to disjoint output elements.
template <size_t N, class RowFn>
void for_each_row(const Shape& shape_in, const std::array<Shape, N>& strides_in, RowFn&& row) {
  constexpr int64_t kBlock = 16384;
  constexpr size_t kMaxDims = 16;  // after merging; fixed arrays keep tiny ops allocation-free
  int64_t numel = shape_numel(shape_in);
  if (numel == 0) return;
  // Merge dims (and drop size-1 dims) where possible.
  std::array<int64_t, kMaxDims> shape{};
  std::array<std::array<int64_t, kMaxDims>, N> strides{};
  size_t ndim = 0;
  for (size_t d = 0; d < shape_in.size(); ++d) {
    if (shape_in[d] == 1) continue;
    bool merge = ndim > 0;
    for (size_t i = 0; i < N && merge; ++i)
      merge = strides[i][ndim - 1] == strides_in[i][d] * shape_in[d];
    if (merge) {
      shape[ndim - 1] *= shape_in[d];
      for (size_t i = 0; i < N; ++i) strides[i][ndim - 1] = strides_in[i][d];
    } else {
      if (ndim == kMaxDims)
        throw std::length_error("for_each_row: more than 16 non-mergeable dims");
      shape[ndim] = shape_in[d];
      for (size_t i = 0; i < N; ++i) strides[i][ndim] = strides_in[i][d];
      ++ndim;
    }
  }
  if (ndim == 0) {
    shape[0] = 1;
    ndim = 1;
  }
  const int64_t inner = shape[ndim - 1];
  const int64_t rows = numel / inner;
  const int64_t blocks_per_row = (inner + kBlock - 1) / kBlock;
  const int64_t tasks = rows * blocks_per_row;
  std::array<int64_t, N> inner_strides;
  for (size_t i = 0; i < N; ++i) inner_strides[i] = strides[i][ndim - 1];
  auto run_task = [&](int64_t t) {
    int64_t r = t / blocks_per_row, block = t % blocks_per_row;
    std::array<int64_t, N> offsets{};
    int64_t rem = r;
    for (size_t d = ndim - 1; d-- > 0;) {
      int64_t idx = rem % shape[d];
      rem /= shape[d];
      for (size_t i = 0; i < N; ++i) offsets[i] += idx * strides[i][d];
    }
    int64_t start = block * kBlock;
    int64_t count = std::min(kBlock, inner - start);
    for (size_t i = 0; i < N; ++i) offsets[i] += start * inner_strides[i];
    row(offsets, count, inner_strides);
  };
  if (numel <= 32768) {  // not worth an OpenMP team (its start-up costs ~1 us)
    for (int64_t t = 0; t < tasks; ++t) run_task(t);
    return;
  }
#pragma omp parallel for schedule(static)
  for (int64_t t = 0; t < tasks; ++t) run_task(t);
}

}  // namespace patchbay::engine::loops
