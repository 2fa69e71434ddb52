// Causal linear attention's numerator as a fused prefix-sum kernel (Katharopoulos et al.
// 2020; the CPU "causal product" of idiap/fast-transformers), with a plain O(T^2)
// reference beside it for tests.
//
// For each of `rows` independent sequences (batch x heads) with q, k [T, E] and v [T, M]:
//   out_l = sum_{j <= l} (q_l . k_j) v_j  =  S_l^T q_l,   S_l = sum_{j <= l} k_j v_j^T  [E, M]
// Only the numerator: the feature map and the normaliser are the caller's (they are cheap
// element-wise ops and a cumulative sum).
//
// Chunked kernel (the chunked form of Katharopoulos et al.'s prefix sums, as in Hua et al.
// 2022 and the "chunkwise" linear attention kernels): positions in chunks of 32; within a
// chunk a masked small GEMM mask(Q_c K_c^T) V_c, across chunks a running fp32 state
// S [E, M] read by Q_c S and updated by K_c^T V_c. Backward without storing states: a forward
// sweep for dq (with S^T) and a reverse sweep for dk, dv with R = sum_{later} q_i dout_i^T
// (causal_linear_chunks.hpp has the formulas). Time O(T (E M + 32 (E + M))), extra memory
// O(E M + 32 (E + M)) per thread, never per position. Every product runs on the register-tiled
// micro GEMM of the flash tiles, compiled per ISA (AVX-512 / AVX2 / generic, picked at run
// time or forced through `isa`), accumulating in fp32.
// Causality is exact: out_l (and dq_l) are computed from positions <= l only (masked entries
// are exact zeros multiplying finite values), so changing later positions leaves them bit for
// bit unchanged, and the result does not depend on T or on the thread count.
// All buffers are contiguous fp32 row-major: q, k, dq, dk [rows, T, E]; v, out, dout, dv
// [rows, T, M]. Outputs are overwritten. Rows run in parallel (OpenMP).
// bf16 operands (shape.bf16, the engine's bf16 autocast): the recipe of the fused dense kernel
// under autocast (attention_flash.hpp's q_bf16): every product takes bf16 operands and
// accumulates in f32. q, k, v and dout are rounded to bf16 on entry (the buffers stay f32; the
// kernel rounds its own copies); the within-chunk products mask(Q_c K_c^T) and
// mask(dO_c V_c^T) are accumulated in f32 and rounded before the product that reads them (as P
// and dS are), and the running states S, S^T, R, R^T stay f32 accumulators whose bf16-rounded
// copy is what the products read. Outputs and gradients are f32. Every code path runs it on
// bf16-exact f32 values (a product of two is exact in f32, so an f32 FMA is a bf16 x bf16
// product with f32 accumulation). The references follow the same rounding points.
#pragma once

#include <cstdint>
#include <string>

#include "patchbay/kernels/attention_flash.hpp"  // KernelIsa

namespace patchbay::kernels {

// Positions per chunk of the kernel (the bf16 references round at the chunk's state).
inline constexpr std::int64_t kCausalLinearChunk = 32;

struct CausalLinearAttentionShape {
  int64_t rows = 0;                      // batch x heads
  int64_t length = 0;                    // T
  int64_t key_dim = 0;                   // E (feature dimension of q and k)
  int64_t value_dim = 0;                 // M
  KernelIsa isa = KernelIsa::automatic;  // a forced code path must be one the CPU runs
  bool bf16 = false;                     // bf16 operands, f32 accumulation (see above)
};

// Empty when the kernels accept `s`, else what was expected and found (shapes, an ISA the CPU
// lacks). The kernels throw std::invalid_argument with this text.
std::string causal_linear_attention_error(const CausalLinearAttentionShape& s);

// out = causal numerator.
void causal_linear_attention_forward(const CausalLinearAttentionShape& s, const float* q,
                                     const float* k, const float* v, float* out);
// dq, dk, dv from dout by the two sweeps.
void causal_linear_attention_backward(const CausalLinearAttentionShape& s, const float* q,
                                      const float* k, const float* v, const float* dout, float* dq,
                                      float* dk, float* dv);

// Plain references: the O(T^2 (E + M)) double loop over (l, j <= l), accumulated in double.
// With s.bf16 the same loops over bf16-rounded q, k, v, dout, with the pair products
// (q_l . k_j), (dout_l . v_j) inside a chunk rounded to bf16 and the earlier (later) chunks'
// part through the bf16-rounded state sum_{j < chunk} k_j v_j^T (sum_{i > chunk} q_i dout_i^T).
void causal_linear_attention_reference_forward(const CausalLinearAttentionShape& s, const float* q,
                                               const float* k, const float* v, float* out);
void causal_linear_attention_reference_backward(const CausalLinearAttentionShape& s, const float* q,
                                                const float* k, const float* v, const float* dout,
                                                float* dq, float* dk, float* dv);

}  // namespace patchbay::kernels
