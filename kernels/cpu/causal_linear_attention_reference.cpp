// Plain O(T^2) references of the causal linear attention kernels
// (causal_linear_attention.hpp): the definition out_l = sum_{j <= l} (q_l . k_j) v_j and its
// gradients written out as double loops, accumulated in double. Tests only; no state.
#include <algorithm>
#include <cstddef>
#include <vector>

#include "patchbay/kernels/causal_linear_attention.hpp"

namespace patchbay::kernels {
namespace {

double dot(const float* a, const float* b, int64_t n) {
  double acc = 0;
  for (int64_t i = 0; i < n; ++i) acc += static_cast<double>(a[i]) * b[i];
  return acc;
}

}  // namespace

void causal_linear_attention_reference_forward(const CausalLinearAttentionShape& s, const float* q,
                                               const float* k, const float* v, float* out) {
  const int64_t t_len = s.length, e_dim = s.key_dim, m_dim = s.value_dim;
  std::vector<double> acc(static_cast<size_t>(m_dim));
  for (int64_t r = 0; r < s.rows; ++r)
    for (int64_t l = 0; l < t_len; ++l) {
      std::fill(acc.begin(), acc.end(), 0.0);
      const float* ql = q + (r * t_len + l) * e_dim;
      for (int64_t j = 0; j <= l; ++j) {
        const double a = dot(ql, k + (r * t_len + j) * e_dim, e_dim);
        const float* vj = v + (r * t_len + j) * m_dim;
        for (int64_t m = 0; m < m_dim; ++m) acc[static_cast<size_t>(m)] += a * vj[m];
      }
      for (int64_t m = 0; m < m_dim; ++m)
        out[(r * t_len + l) * m_dim + m] = static_cast<float>(acc[static_cast<size_t>(m)]);
    }
}

void causal_linear_attention_reference_backward(const CausalLinearAttentionShape& s, const float* q,
                                                const float* k, const float* v, const float* dout,
                                                float* dq, float* dk, float* dv) {
  const int64_t t_len = s.length, e_dim = s.key_dim, m_dim = s.value_dim;
  const size_t qk_size = static_cast<size_t>(s.rows * t_len * e_dim);
  const size_t v_size = static_cast<size_t>(s.rows * t_len * m_dim);
  std::vector<double> gq(qk_size, 0.0), gk(qk_size, 0.0), gv(v_size, 0.0);
  for (int64_t r = 0; r < s.rows; ++r)
    for (int64_t l = 0; l < t_len; ++l) {
      const int64_t il = r * t_len + l;
      for (int64_t j = 0; j <= l; ++j) {
        const int64_t ij = r * t_len + j;
        // out_l += (q_l . k_j) v_j: d(q_l . k_j) = dout_l . v_j.
        const double g = dot(dout + il * m_dim, v + ij * m_dim, m_dim);
        const double a = dot(q + il * e_dim, k + ij * e_dim, e_dim);
        for (int64_t e = 0; e < e_dim; ++e) {
          gq[static_cast<size_t>(il * e_dim + e)] += g * k[ij * e_dim + e];
          gk[static_cast<size_t>(ij * e_dim + e)] += g * q[il * e_dim + e];
        }
        for (int64_t m = 0; m < m_dim; ++m)
          gv[static_cast<size_t>(ij * m_dim + m)] += a * dout[il * m_dim + m];
      }
    }
  for (size_t i = 0; i < qk_size; ++i) {
    dq[i] = static_cast<float>(gq[i]);
    dk[i] = static_cast<float>(gk[i]);
  }
  for (size_t i = 0; i < v_size; ++i) dv[i] = static_cast<float>(gv[i]);
}

}  // namespace patchbay::kernels
