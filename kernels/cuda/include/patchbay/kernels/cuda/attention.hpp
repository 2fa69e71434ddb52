// Fused causal self-attention (flash attention: the T x T score matrix is never stored),
// forward and backward, f32, head dimension 32, 64 or 128. Layout: q, k, v, out and their
// gradients [batch_heads, T, D] contiguous (one head's rows together); lse [batch_heads, T],
// the per-row log-sum-exp of the scaled scores, saved by the forward for the backward.
//   out_i = sum_{j <= i} softmax_j(scale * q_i . k_j) v_j
// The backward is FlashAttention-2's recomputation, split into two deterministic kernels (one
// owns key rows and sums dK, dV over queries; one owns query rows and sums dQ over keys), so
// there are no float atomics and the same inputs give the same bits. CUDA cores, f32: the
// exact (evaluation) path; a bf16 tensor-core path (or cuDNN's) is the speed path still to
// come. CPU twin: attention_reference.hpp.
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>

namespace patchbay::kernels::cuda {

// Packed sequences: segments [batch, steps] (device memory, each row non-decreasing; nullptr =
// none) restrict query i to the keys j <= i of its own segment (seg[j] == seg[i]); batch_heads
// = batch * heads, rows of one batch entry consecutive.
// Returns cudaErrorInvalidValue when head_dim is not 32, 64 or 128.
cudaError_t causal_attention_forward(const float* q, const float* k, const float* v, float* out,
                                     float* lse, int64_t batch_heads, int64_t steps,
                                     int64_t head_dim, float scale, cudaStream_t stream,
                                     const int32_t* segments = nullptr, int64_t heads = 1);

// dq, dk, dv are overwritten. delta: device workspace of batch_heads * steps floats
// (row sums of dout * out).
cudaError_t causal_attention_backward(const float* q, const float* k, const float* v,
                                      const float* out, const float* dout, const float* lse,
                                      float* delta, float* dq, float* dk, float* dv,
                                      int64_t batch_heads, int64_t steps, int64_t head_dim,
                                      float scale, cudaStream_t stream,
                                      const int32_t* segments = nullptr, int64_t heads = 1);

}  // namespace patchbay::kernels::cuda
