// How the gather / scatter-add kernels (indexing.hpp) and their CPU twin walk a dense tensor
// along an index, apart so the twin needs no CUDA headers.
//
// The index tensor (rank <= kMaxStridedRank, contiguous) is the iteration shape. A dense
// contiguous tensor D walked "along dim" is read or written at the index's coordinates with
// the coordinate along `dim` replaced by the index value id:
//   offset = strided_offset(index_shape, strides_without_dim, flat) + id * dim_stride
// (strides_without_dim = D's row-major strides with the entry of `dim` set to 0). A dense
// tensor walked "at the index" (scatter_add's src) uses its full strides: offset =
// strided_offset(index_shape, strides, flat).
#pragma once

#include <cstdint>

#include "patchbay/kernels/cuda/strided_types.hpp"

namespace patchbay::kernels::cuda {

struct AlongDim {
  Strides without_dim;     // row-major strides, 0 at dim
  int64_t dim_stride = 0;  // the stride along dim
  int64_t dim_size = 0;    // ids must lie in [0, dim_size)
};

// The index viewed as [outer, length, inner] around dim (scatter_add's lines are (outer, inner)).
struct IndexShape {
  StridedShape shape;
  int dim = 0;
};

// Row-major strides of a contiguous tensor of `rank` sizes.
inline Strides contiguous_strides(const int64_t* sizes, int rank) {
  Strides strides;
  int64_t stride = 1;
  for (int d = rank - 1; d >= 0; --d) {
    strides.values[d] = stride;
    stride *= sizes[d];
  }
  return strides;
}

inline AlongDim along_dim_of(const int64_t* sizes, int rank, int dim) {
  AlongDim walk;
  walk.without_dim = contiguous_strides(sizes, rank);
  walk.dim_stride = walk.without_dim.values[dim];
  walk.without_dim.values[dim] = 0;
  walk.dim_size = sizes[dim];
  return walk;
}

inline IndexShape index_shape_of(const int64_t* sizes, int rank, int dim) {
  IndexShape index;
  index.shape.rank = rank;
  for (int d = 0; d < rank; ++d) index.shape.sizes[d] = sizes[d];
  index.dim = dim;
  return index;
}

// scatter_add's destination slices: the kernel runs lines x slices threads, thread (line, s)
// walking its line in index order and adding only the entries whose destination lies in slice s
// ([s * per, (s + 1) * per), per = ceil(dim_size / slices)). Every destination still receives
// its additions in index order from one thread (the CPU's sums bit for bit); slicing only adds
// parallelism when lines are few and long (the MoE combine: a few hundred columns of N*k rows),
// at the price of every slice re-reading its line's index. 1 when the lines alone fill the GPU.
inline int64_t scatter_add_slices(int64_t lines, int64_t length, int64_t dim_size) {
  constexpr int64_t kWantedThreads = 132 * 256;  // two 128-thread blocks per H100/H200 SM
  constexpr int64_t kMaxSlices = 256;
  if (lines <= 0 || lines >= kWantedThreads || length < 64 || dim_size < 2) return 1;
  int64_t slices = kWantedThreads / lines;
  if (slices > kMaxSlices) slices = kMaxSlices;
  if (slices > dim_size) slices = dim_size;
  return slices < 1 ? 1 : slices;
}

}  // namespace patchbay::kernels::cuda
