// Gather and scatter-add along one dimension (PyTorch torch.gather / Tensor.scatter_add_
// semantics) on contiguous row-major f32 tensors of any rank ≥ 1.
//
// With dim = 1 of a rank-3 index, for every index coordinate (a, j, b):
//   gather:       out[a][j][b] = input[a][index[a][j][b]][b]
//   scatter_add:  self[a][index[a][j][b]][b] += src[a][j][b]
// Shapes (sizes in row-major order, spans of equal rank):
//   gather:       index_shape[d] ≤ input_shape[d] for d ≠ dim; out has index_shape.
//   scatter_add:  index_shape[d] ≤ self_shape[d] for d ≠ dim, index_shape[d] ≤ src_shape[d]
//                 for every d; only the index-shaped corner of src is read.
// Gradients:
//   gather:       grad_input += scatter_add(grad_out at index)      -> gather_backward
//   scatter_add:  grad_self = grad_out;  grad_src = gather(grad_out) on the index-shaped
//                 corner of src, 0 elsewhere                           -> scatter_add_backward_src
// Preconditions (not checked here): shapes as above, 0 ≤ dim < rank, every index entry in
// [0, size of dim in input / self) — check with first_index_out_of_range. Index is int32_t
// or int64_t.
// Determinism: every destination element receives its contributions in index order
// whatever the thread count (threads split lines of the index that write disjoint lines).
#pragma once

#include <cstdint>
#include <span>

namespace patchbay::kernels {

using ShapeView = std::span<const int64_t>;

// out (index_shape, overwritten).
template <class Index>
void gather_forward(const float* input, ShapeView input_shape, int dim, const Index* index,
                    ShapeView index_shape, float* out);

// self (self_shape) is accumulated into.
template <class Index>
void scatter_add(float* self, ShapeView self_shape, int dim, const Index* index,
                 ShapeView index_shape, const float* src, ShapeView src_shape);

// grad_input (input_shape) is accumulated into: zero it first for a fresh gradient.
template <class Index>
void gather_backward(const float* grad_out, const Index* index, ShapeView index_shape, int dim,
                     float* grad_input, ShapeView input_shape);

// grad_src (src_shape, overwritten) for self' = scatter_add(self, index, src).
template <class Index>
void scatter_add_backward_src(const float* grad_out, ShapeView self_shape, int dim,
                              const Index* index, ShapeView index_shape, float* grad_src,
                              ShapeView src_shape);

// Plain references: every index element's coordinates unravelled one by one.
template <class Index>
void gather_forward_reference(const float* input, ShapeView input_shape, int dim,
                              const Index* index, ShapeView index_shape, float* out);
template <class Index>
void scatter_add_reference(float* self, ShapeView self_shape, int dim, const Index* index,
                           ShapeView index_shape, const float* src, ShapeView src_shape);

}  // namespace patchbay::kernels
