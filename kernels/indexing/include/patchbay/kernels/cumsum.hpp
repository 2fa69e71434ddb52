// Cumulative sum along one dimension of a contiguous f32 tensor.
//
// The tensor is viewed as [outer, length, inner]: `length` is the size of the summed
// dimension, `outer` the product of the sizes before it, `inner` the product after it.
//   forward:           out[o, j, i] = Σ_{k ≤ j} x[o, k, i]
//   forward, reverse:  out[o, j, i] = Σ_{k ≥ j} x[o, k, i]
// The backward of a cumsum is the cumsum of the gradient in the opposite direction, so
// cumsum_backward is cumsum_forward with `reverse` flipped.
// Sums run in double and are rounded once per element (the same choice as PyTorch's CPU
// cumsum), so a long prefix does not drift.
// out may equal x (in place). Thread safety: pure functions of their arguments.
#pragma once

#include <cstdint>

namespace patchbay::kernels {

void cumsum_forward(const float* x, int64_t outer, int64_t length, int64_t inner, bool reverse,
                    float* out);

// grad_x (overwritten) for out = cumsum_forward(x, ..., reverse).
void cumsum_backward(const float* grad_out, int64_t outer, int64_t length, int64_t inner,
                     bool reverse, float* grad_x);

// Plain reference: each output element summed from scratch, O(length²) per line.
void cumsum_forward_reference(const float* x, int64_t outer, int64_t length, int64_t inner,
                              bool reverse, float* out);

}  // namespace patchbay::kernels
