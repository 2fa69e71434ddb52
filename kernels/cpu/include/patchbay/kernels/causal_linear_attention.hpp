// Causal linear attention's numerator as a fused prefix-sum kernel (Katharopoulos et al.
// 2020; the CPU "causal product" of idiap/fast-transformers), with a plain O(T^2)
// reference beside it for tests.
//
// For each of `rows` independent sequences (batch x heads) with q, k [T, E] and v [T, M]:
//   out_l = sum_{j <= l} (q_l . k_j) v_j  =  S_l^T q_l,   S_l = sum_{j <= l} k_j v_j^T  [E, M]
// Only the numerator: the feature map and the normaliser are the caller's (they are cheap
// element-wise ops and a cumulative sum).
//
// Fused kernel: one forward sweep keeping S [E, M] in fp32, so time O(T E M) and extra memory
// O(E M) per row (never T states). Backward, without storing states (fast-transformers'
// causal_product_cpu scheme):
//   forward sweep  S_l = sum_{j <= l} k_j v_j^T,   dq_l = S_l dout_l
//   reverse sweep  R_l = sum_{j >= l} q_j dout_j^T, dk_l = R_l v_l, dv_l = R_l^T k_l
// All buffers are contiguous fp32 row-major: q, k, dq, dk [rows, T, E]; v, out, dout, dv
// [rows, T, M]. Outputs are overwritten. Rows run in parallel (OpenMP).
#pragma once

#include <cstdint>

namespace patchbay::kernels {

struct CausalLinearAttentionShape {
  int64_t rows = 0;       // batch x heads
  int64_t length = 0;     // T
  int64_t key_dim = 0;    // E (feature dimension of q and k)
  int64_t value_dim = 0;  // M
};

// out = causal numerator, O(T E M) time, O(E M) state per row.
void causal_linear_attention_forward(const CausalLinearAttentionShape& s, const float* q,
                                     const float* k, const float* v, float* out);
// dq, dk, dv from dout by the two sweeps above.
void causal_linear_attention_backward(const CausalLinearAttentionShape& s, const float* q,
                                      const float* k, const float* v, const float* dout, float* dq,
                                      float* dk, float* dv);

// Plain references: the O(T^2 (E + M)) double loop over (l, j <= l), accumulated in double.
void causal_linear_attention_reference_forward(const CausalLinearAttentionShape& s, const float* q,
                                               const float* k, const float* v, float* out);
void causal_linear_attention_reference_backward(const CausalLinearAttentionShape& s, const float* q,
                                                const float* k, const float* v, const float* dout,
                                                float* dq, float* dk, float* dv);

}  // namespace patchbay::kernels
