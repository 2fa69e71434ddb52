// CPU twins of indexing.hpp: the same algorithms on the CPU (gather and the backward per index
// element, scatter_add per index line in index order, sort by the same bitonic schedule of tiles,
// global passes and tile merges), so CI checks on the CPU that they give the CPU engine
// kernels' results (kernels/indexing) bit for bit, and the GPU tests compare the kernels with
// them.
#pragma once

#include <cstdint>

#include "patchbay/kernels/cuda/indexing_types.hpp"

namespace patchbay::kernels::cuda {

template <class Index>
void gather_f32_reference(const float* input, const AlongDim& input_walk, const Index* index,
                          const IndexShape& index_shape, float* out);
template <class Index>
void scatter_add_f32_reference(float* self, const AlongDim& self_walk, const Index* index,
                               const IndexShape& index_shape, const float* src,
                               const Strides& src_strides);
template <class Index>
void scatter_add_backward_src_f32_reference(const float* grad_out, const AlongDim& self_walk,
                                            const Index* index, const IndexShape& index_shape,
                                            float* grad_src, const Strides& src_strides,
                                            int64_t src_count);

// tile_keys: the kernel's tile (2048); smaller values run the multi-tile schedule on short rows.
void sort_rows_f32_reference(const float* x, int64_t rows, int64_t length, int64_t count,
                             bool descending, float* values, int64_t* indices,
                             int64_t tile_keys = 2048);
void selection_backward_f32_reference(const float* grad_selected, const int64_t* indices,
                                      int64_t rows, int64_t length, int64_t k, float* grad_x);

}  // namespace patchbay::kernels::cuda
