// The fused causal linear attention kernels (causal_linear_attention.hpp): one [E, M] fp32
// running state per row, updated by a rank-one outer product each step. The inner loops run
// over the contiguous M axis so the compiler vectorises them.
#include "patchbay/kernels/causal_linear_attention.hpp"

#include <algorithm>
#include <cstddef>
#include <vector>

namespace patchbay::kernels {
namespace {

// state[e, :] += a[e] * b[:]   (state [E, M])
inline void add_outer(float* state, const float* a, const float* b, int64_t e_dim, int64_t m_dim) {
  for (int64_t e = 0; e < e_dim; ++e) {
    const float ae = a[e];
    float* row = state + e * m_dim;
    for (int64_t m = 0; m < m_dim; ++m) row[m] += ae * b[m];
  }
}

// out[:] = state^T a   (out [M])
inline void state_transpose_times(const float* state, const float* a, float* out, int64_t e_dim,
                                  int64_t m_dim) {
  std::fill(out, out + m_dim, 0.f);
  for (int64_t e = 0; e < e_dim; ++e) {
    const float ae = a[e];
    const float* row = state + e * m_dim;
    for (int64_t m = 0; m < m_dim; ++m) out[m] += ae * row[m];
  }
}

// out[e] = state[e, :] . b   (out [E])
inline void state_times(const float* state, const float* b, float* out, int64_t e_dim,
                        int64_t m_dim) {
  for (int64_t e = 0; e < e_dim; ++e) {
    const float* row = state + e * m_dim;
    float acc = 0.f;
    for (int64_t m = 0; m < m_dim; ++m) acc += row[m] * b[m];
    out[e] = acc;
  }
}

bool big_enough(const CausalLinearAttentionShape& s) {
  return s.rows > 1 && s.rows * s.length * s.key_dim * s.value_dim > (1 << 14);
}

}  // namespace

void causal_linear_attention_forward(const CausalLinearAttentionShape& s, const float* q,
                                     const float* k, const float* v, float* out) {
  const int64_t t_len = s.length, e_dim = s.key_dim, m_dim = s.value_dim;
#pragma omp parallel for schedule(static) if (big_enough(s))
  for (int64_t r = 0; r < s.rows; ++r) {
    std::vector<float> state(static_cast<size_t>(e_dim * m_dim), 0.f);
    const float* qr = q + r * t_len * e_dim;
    const float* kr = k + r * t_len * e_dim;
    const float* vr = v + r * t_len * m_dim;
    float* outr = out + r * t_len * m_dim;
    for (int64_t l = 0; l < t_len; ++l) {
      add_outer(state.data(), kr + l * e_dim, vr + l * m_dim, e_dim, m_dim);
      state_transpose_times(state.data(), qr + l * e_dim, outr + l * m_dim, e_dim, m_dim);
    }
  }
}

void causal_linear_attention_backward(const CausalLinearAttentionShape& s, const float* q,
                                      const float* k, const float* v, const float* dout, float* dq,
                                      float* dk, float* dv) {
  const int64_t t_len = s.length, e_dim = s.key_dim, m_dim = s.value_dim;
#pragma omp parallel for schedule(static) if (big_enough(s))
  for (int64_t r = 0; r < s.rows; ++r) {
    std::vector<float> state(static_cast<size_t>(e_dim * m_dim), 0.f);
    const float* qr = q + r * t_len * e_dim;
    const float* kr = k + r * t_len * e_dim;
    const float* vr = v + r * t_len * m_dim;
    const float* dor = dout + r * t_len * m_dim;
    // Forward sweep: dq_l = S_l dout_l with S_l including step l.
    for (int64_t l = 0; l < t_len; ++l) {
      add_outer(state.data(), kr + l * e_dim, vr + l * m_dim, e_dim, m_dim);
      state_times(state.data(), dor + l * m_dim, dq + (r * t_len + l) * e_dim, e_dim, m_dim);
    }
    // Reverse sweep: R_l = sum_{j >= l} q_j dout_j^T; dk_l = R_l v_l, dv_l = R_l^T k_l.
    std::fill(state.begin(), state.end(), 0.f);
    for (int64_t l = t_len - 1; l >= 0; --l) {
      add_outer(state.data(), qr + l * e_dim, dor + l * m_dim, e_dim, m_dim);
      state_times(state.data(), vr + l * m_dim, dk + (r * t_len + l) * e_dim, e_dim, m_dim);
      state_transpose_times(state.data(), kr + l * e_dim, dv + (r * t_len + l) * m_dim, e_dim,
                            m_dim);
    }
  }
}

}  // namespace patchbay::kernels
