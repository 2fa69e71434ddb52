// Gather / scatter-add along one dim, stable sort and top-k along the last dim, and the
// selection backward (sort's and top-k's gradient): the CUDA counterparts of the CPU kernels in
// kernels/indexing (gather_scatter.hpp, sort_topk.hpp), with the same results bit for bit.
// CPU twins (the same algorithms, run on the CPU): indexing_reference.hpp.
//
// gather / scatter-add (shapes and walks: indexing_types.hpp; float data contiguous f32,
// index contiguous int32 or int64, rank <= 8):
//   gather:       out[flat] = input[index coords with coord(dim) = index[flat]]
//   scatter_add:  self[index coords with coord(dim) = index[flat]] += src[index coords]
//   scatter_add_backward_src: grad_src[index coords] = grad_out[coords with coord(dim) = id],
//                 0 on the part of src the index does not cover.
// Determinism: scatter_add runs one thread per index line (all coordinates but dim fixed) that
// adds its line's contributions in index order; two lines never share a destination, so
// every destination element receives exactly the CPU kernel's additions in the CPU's order
// (f32 adds, the same rounding): results equal the CPU's bit for bit and repeat run to run.
// The price is a serial walk along dim; when lines are few and long, each line's destinations
// are split into slices (indexing_types.hpp: scatter_add_slices), one thread per (line, slice)
// walking the whole line and adding only its slice's entries: the same per-destination order,
// more threads, each slice re-reading the index. A destination receiving K additions still
// takes K serial adds (the CPU's order forbids a tree).
// Out-of-range ids: the caller checks them (the engine entries do, with the CPU's message); a
// kernel given one reads and writes nothing for it (gather writes NaN there).
//
// sort / top-k (keys and network: math/sort_keys.hpp): each row is packed into uint64 keys,
// padded to a power of two P and sorted by a bitonic network (tiles of up to 2048 keys in
// shared memory, longer distances in global memory); the first `count` keys give the values
// and positions. Ties keep the lower position first, NaN is larger than +inf, -0 equals +0:
// the CPU's order, whatever the network. Workspace: rows * P uint64 (sort_workspace_keys).
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>

#include "patchbay/kernels/cuda/indexing_types.hpp"

namespace patchbay::kernels::cuda {

// out (index's shape, overwritten).
template <class Index>
cudaError_t gather_f32(const float* input, const AlongDim& input_walk, const Index* index,
                       const IndexShape& index_shape, float* out, cudaStream_t stream);

// self accumulated into; src read at the index's coordinates with its full strides.
template <class Index>
cudaError_t scatter_add_f32(float* self, const AlongDim& self_walk, const Index* index,
                            const IndexShape& index_shape, const float* src,
                            const Strides& src_strides, cudaStream_t stream);

// grad_src (src_count elements, overwritten) from grad_out (self's shape).
template <class Index>
cudaError_t scatter_add_backward_src_f32(const float* grad_out, const AlongDim& self_walk,
                                         const Index* index, const IndexShape& index_shape,
                                         float* grad_src, const Strides& src_strides,
                                         int64_t src_count, cudaStream_t stream);

// The uint64 workspace sort_rows_f32 needs for `rows` rows of `length`.
int64_t sort_workspace_keys(int64_t rows, int64_t length);

// x [rows, length] -> the first `count` elements of each row in sorted order: values
// [rows, count] (nullable) and indices [rows, count] (positions along the row). descending:
// largest first (top-k largest = sort descending, first k). length < math::kMaxSortLength.
cudaError_t sort_rows_f32(const float* x, int64_t rows, int64_t length, int64_t count,
                          bool descending, float* values, int64_t* indices, uint64_t* workspace,
                          cudaStream_t stream);

// grad_x [rows, length] (overwritten): grad_selected [rows, k] written at indices [rows, k]
// (distinct within a row), 0 elsewhere. An index outside [0, length) is skipped.
cudaError_t selection_backward_f32(const float* grad_selected, const int64_t* indices, int64_t rows,
                                   int64_t length, int64_t k, float* grad_x, cudaStream_t stream);

}  // namespace patchbay::kernels::cuda
