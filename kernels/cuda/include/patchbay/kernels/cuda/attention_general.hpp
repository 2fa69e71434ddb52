// Scaled-dot-product attention for every variant the engine's op has (the CPU flash kernel's
// semantics, kernels/cpu/include/patchbay/kernels/attention_flash.hpp): queries that are the
// LAST Tq of Tk positions (a KV cache: decode with Tq = 1, chunked prefill), grouped-query
// key/value heads, causal or not, a sliding window, ALiBi slopes; f32, any head dim up to 256.
//
//   pos(i) = i + Tk - Tq;  visible(i, j) = (!causal || j <= pos(i))
//                                        && (window == 0 || pos(i) - window < j)
//                                        && (window == 0 || causal || j < pos(i) + window)
//                                        && (!segments || seg[j] == seg[pos(i)])
//   bias(i, j) = -slope[h] * |pos(i) - j|;  a row with no visible key: out = 0, lse = -inf.
// Packed sequences: segments [B, Tk] (device memory, each row non-decreasing, Tq <= Tk) narrow
// each query's span of keys to its own segment (math/segments.hpp).
//
// One warp per query row (forward and dQ) or per key row (dK, dV, summed over the query heads
// that share the key head): the lanes split the head dim and meet in a shuffle reduction per
// key. That is a plain O(Tq * Tk * D) CUDA-core path, exact f32 with deterministic sums (no
// atomics), meant for decoding (memory-bound) and for the variants the tiled causal kernel
// (attention.hpp) does not take; the tiled kernel stays the training path for plain causal
// self-attention. Layout: q, out, dq [B, H, Tq, D]; k, v, dk, dv [B, Hkv, Tk, D]; lse, delta
// [B, H, Tq]; all contiguous. CPU twin: the engine's CPU attention op (tests/device).
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>

namespace patchbay::kernels::cuda {

inline constexpr int kGeneralAttentionMaxHeads = 256;
inline constexpr int kGeneralAttentionMaxHeadDim = 256;

struct GeneralAttentionShape {
  int64_t batch = 0, heads = 0, kv_heads = 0, q_len = 0, kv_len = 0, head_dim = 0;
  float scale = 0.f;
  bool causal = false;
  int64_t window = 0;  // 0 = unlimited
  bool has_slopes = false;
  float slopes[kGeneralAttentionMaxHeads] = {};  // ALiBi, [heads] (passed by value)
  const int32_t* segments = nullptr;             // [B, Tk] device memory, or none
};

// cudaErrorInvalidValue when heads > 256, head_dim > 256, or kv_heads does not divide heads.
cudaError_t general_attention_forward(const GeneralAttentionShape& s, const float* q,
                                      const float* k, const float* v, float* out, float* lse,
                                      cudaStream_t stream);

// dq, dk, dv are overwritten. delta: workspace of B * H * Tq floats (rows of dout . out).
cudaError_t general_attention_backward(const GeneralAttentionShape& s, const float* q,
                                       const float* k, const float* v, const float* out,
                                       const float* dout, const float* lse, float* delta, float* dq,
                                       float* dk, float* dv, cudaStream_t stream);

}  // namespace patchbay::kernels::cuda
