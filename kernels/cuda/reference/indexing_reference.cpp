// CPU twins of the gather / scatter-add and sort / top-k kernels (indexing_reference.hpp).
#include "patchbay/kernels/cuda/indexing_reference.hpp"

#include <algorithm>
#include <cmath>
#include <vector>

#include "patchbay/kernels/cuda/math/sort_keys.hpp"

namespace patchbay::kernels::cuda {
namespace {

namespace m = math;

bool in_range(int64_t id, const AlongDim& walk) { return id >= 0 && id < walk.dim_size; }

// The tile step of the sort: stages k_first..k_last of the tile at `base` (all distances of
// each stage, or only those below the tile when merge_only), as tile_network on the GPU.
void tile_network(uint64_t* row_keys, int64_t tile_keys, int64_t base, int64_t k_first,
                  int64_t k_last, bool merge_only) {
  uint64_t* tile = row_keys + base;
  for (int64_t k = k_first; k <= k_last; k <<= 1)
    for (int64_t j = merge_only ? tile_keys >> 1 : k >> 1; j > 0; j >>= 1)
      for (int64_t pair = 0; pair < tile_keys / 2; ++pair) {
        const int64_t low = m::bitonic_pair_low(pair, j);
        m::bitonic_compare_exchange(tile, low, j, m::bitonic_ascending(base + low, k));
      }
}

}  // namespace

template <class Index>
void gather_f32_reference(const float* input, const AlongDim& walk, const Index* index,
                          const IndexShape& index_shape, float* out) {
  const int64_t count = element_count(index_shape.shape);
  for (int64_t flat = 0; flat < count; ++flat) {
    const auto id = static_cast<int64_t>(index[flat]);
    out[flat] = in_range(id, walk)
                    ? input[strided_offset(index_shape.shape, walk.without_dim, flat) +
                            id * walk.dim_stride]
                    : NAN;
  }
}

template <class Index>
void scatter_add_f32_reference(float* self, const AlongDim& walk, const Index* index,
                               const IndexShape& index_shape, const float* src,
                               const Strides& src_strides) {
  const StridedShape& shape = index_shape.shape;
  const int64_t length = shape.sizes[index_shape.dim];
  if (length == 0) return;
  int64_t inner = 1;
  for (int d = index_shape.dim + 1; d < shape.rank; ++d) inner *= shape.sizes[d];
  const int64_t lines = element_count(shape) / length;
  // The kernel's work items (line, destination slice), each walking its line in index order.
  const int64_t slices = scatter_add_slices(lines, length, walk.dim_size);
  const int64_t per_slice = (walk.dim_size + slices - 1) / slices;
  for (int64_t work = 0; work < lines * slices; ++work) {
    const int64_t line = work % lines, slice = work / lines;
    const int64_t first = slice * per_slice, end = std::min(first + per_slice, walk.dim_size);
    const int64_t outer = line / inner, i = line % inner;
    for (int64_t j = 0; j < length; ++j) {
      const int64_t flat = (outer * length + j) * inner + i;
      const auto id = static_cast<int64_t>(index[flat]);
      if (!in_range(id, walk) || id < first || id >= end) continue;
      self[strided_offset(shape, walk.without_dim, flat) + id * walk.dim_stride] +=
          src[strided_offset(shape, src_strides, flat)];
    }
  }
}

template <class Index>
void scatter_add_backward_src_f32_reference(const float* grad_out, const AlongDim& walk,
                                            const Index* index, const IndexShape& index_shape,
                                            float* grad_src, const Strides& src_strides,
                                            int64_t src_count) {
  std::fill(grad_src, grad_src + src_count, 0.0f);
  const int64_t count = element_count(index_shape.shape);
  for (int64_t flat = 0; flat < count; ++flat) {
    const auto id = static_cast<int64_t>(index[flat]);
    if (!in_range(id, walk)) continue;
    grad_src[strided_offset(index_shape.shape, src_strides, flat)] =
        grad_out[strided_offset(index_shape.shape, walk.without_dim, flat) + id * walk.dim_stride];
  }
}

void sort_rows_f32_reference(const float* x, int64_t rows, int64_t length, int64_t count,
                             bool descending, float* values, int64_t* indices, int64_t tile_keys) {
  const int64_t padded = m::bitonic_padded_length(length);
  tile_keys = std::min(padded, tile_keys);
  std::vector<uint64_t> keys(static_cast<size_t>(padded));
  for (int64_t r = 0; r < rows; ++r) {
    for (int64_t p = 0; p < padded; ++p)
      keys[size_t(p)] = p < length ? m::sort_key(x[r * length + p], p, descending) : m::kPadKey;
    // The GPU's schedule: whole tiles, then per larger stage the long distances and a merge.
    for (int64_t base = 0; base < padded; base += tile_keys)
      tile_network(keys.data(), tile_keys, base, 2, tile_keys, false);
    for (int64_t k = 2 * tile_keys; k <= padded; k <<= 1) {
      for (int64_t j = k >> 1; j >= tile_keys; j >>= 1)
        for (int64_t pair = 0; pair < padded / 2; ++pair) {
          const int64_t low = m::bitonic_pair_low(pair, j);
          m::bitonic_compare_exchange(keys.data(), low, j, m::bitonic_ascending(low, k));
        }
      for (int64_t base = 0; base < padded; base += tile_keys)
        tile_network(keys.data(), tile_keys, base, k, k, true);
    }
    for (int64_t c = 0; c < count; ++c) {
      const int64_t position = m::sort_key_position(keys[size_t(c)]);
      indices[r * count + c] = position;
      if (values != nullptr) values[r * count + c] = x[r * length + position];
    }
  }
}

void selection_backward_f32_reference(const float* grad_selected, const int64_t* indices,
                                      int64_t rows, int64_t length, int64_t k, float* grad_x) {
  std::fill(grad_x, grad_x + rows * length, 0.0f);
  for (int64_t e = 0; e < rows * k; ++e)
    if (indices[e] >= 0 && indices[e] < length)
      grad_x[(e / k) * length + indices[e]] = grad_selected[e];
}

#define PATCHBAY_INSTANTIATE(Index)                                                                \
  template void gather_f32_reference<Index>(const float*, const AlongDim&, const Index*,           \
                                            const IndexShape&, float*);                            \
  template void scatter_add_f32_reference<Index>(float*, const AlongDim&, const Index*,            \
                                                 const IndexShape&, const float*, const Strides&); \
  template void scatter_add_backward_src_f32_reference<Index>(const float*, const AlongDim&,       \
                                                              const Index*, const IndexShape&,     \
                                                              float*, const Strides&, int64_t);
PATCHBAY_INSTANTIATE(int32_t)
PATCHBAY_INSTANTIATE(int64_t)
#undef PATCHBAY_INSTANTIATE

}  // namespace patchbay::kernels::cuda
