// Fused causal self-attention with bf16 operands on tensor cores (FlashAttention-2 style), the
// speed path of the engine's attention op under a bf16 autocast on CUDA; attention.hpp's f32
// kernels stay the exact (evaluation) path and serve every other head dim. Head dim 64 or 128.
// Meaning (the CPU's bf16 flash kernel's): q, k, v, dout bf16 (raw uint16 patterns, round to
// nearest even, math/bf16.hpp); products take bf16 operands with f32 accumulation; scores,
// softmax statistics, lse, out and the gradients f32; P and dS rounded to bf16 only as product
// operands (math/flash_bf16.hpp holds this arithmetic, shared with the CPU twin
// attention_bf16_reference.hpp). Layout as attention.hpp: [batch_heads, T, D] contiguous, lse
// [batch_heads, T]; packed sequences through `segments` as there. Deterministic: the backward
// uses no atomics (a dK/dV kernel per key block and a dQ kernel per query block), so the same
// inputs give the same bits.
// Errors: cudaErrorInvalidValue for another head dim, heads not dividing batch_heads or
// batch_heads > 65535; cudaErrorMisalignedAddress when q, k, v or dout is not 16-byte aligned
// (the tiles are read with 16-byte loads).
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>

namespace patchbay::kernels::cuda {

constexpr bool causal_attention_bf16_serves_head_dim(int64_t head_dim) {
  return head_dim == 64 || head_dim == 128;
}

cudaError_t causal_attention_bf16_forward(const uint16_t* q, const uint16_t* k, const uint16_t* v,
                                          float* out, float* lse, int64_t batch_heads,
                                          int64_t steps, int64_t head_dim, float scale,
                                          cudaStream_t stream, const int32_t* segments = nullptr,
                                          int64_t heads = 1);

// dq, dk, dv (f32) are overwritten. delta: device workspace of batch_heads * steps floats.
cudaError_t causal_attention_bf16_backward(const uint16_t* q, const uint16_t* k, const uint16_t* v,
                                           const float* out, const uint16_t* dout, const float* lse,
                                           float* delta, float* dq, float* dk, float* dv,
                                           int64_t batch_heads, int64_t steps, int64_t head_dim,
                                           float scale, cudaStream_t stream,
                                           const int32_t* segments = nullptr, int64_t heads = 1);

}  // namespace patchbay::kernels::cuda
