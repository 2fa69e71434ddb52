// Plain O(T^2) references of the causal linear attention kernels
// (causal_linear_attention.hpp): the definition out_l = sum_{j <= l} (q_l . k_j) v_j and its
// gradients written out as double loops, accumulated in double. Tests only; no state.
// bf16 operands (s.bf16): the same loops over rounded inputs, with the rounding points of the
// kernel written out plainly: a pair product inside the query's chunk rounded, the earlier
// chunks through the rounded state (the backward's later chunks likewise).
#include <algorithm>
#include <cstddef>
#include <vector>

#include "patchbay/kernels/bf16_rounding.hpp"
#include "patchbay/kernels/causal_linear_attention.hpp"

namespace patchbay::kernels {
namespace {

double dot(const float* a, const float* b, int64_t n) {
  double acc = 0;
  for (int64_t i = 0; i < n; ++i) acc += static_cast<double>(a[i]) * b[i];
  return acc;
}

float round_double(double x) { return round_to_bf16(static_cast<float>(x)); }

std::vector<float> rounded(const float* x, int64_t n) {
  std::vector<float> out(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) out[static_cast<size_t>(i)] = round_to_bf16(x[i]);
  return out;
}

int64_t chunk_start(int64_t l) { return l / kCausalLinearChunk * kCausalLinearChunk; }

// out_l = sum_{chunk(l) <= j <= l} bf16(q_l . k_j) v_j + q_l bf16(S), S = sum_{j < chunk(l)}
// k_j v_j^T, over rounded inputs (one row; state [E][M] in double).
void bf16_forward_row(const CausalLinearAttentionShape& s, const float* q, const float* k,
                      const float* v, float* out) {
  const int64_t e_dim = s.key_dim, m_dim = s.value_dim;
  std::vector<double> state(static_cast<size_t>(e_dim * m_dim), 0.0),
      acc(static_cast<size_t>(m_dim));
  for (int64_t l = 0; l < s.length; ++l) {
    const int64_t c0 = chunk_start(l);
    if (l == c0 && l > 0)  // the state now holds every j < c0
      for (int64_t j = c0 - kCausalLinearChunk; j < c0; ++j)
        for (int64_t e = 0; e < e_dim; ++e)
          for (int64_t m = 0; m < m_dim; ++m)
            state[size_t(e * m_dim + m)] += double(k[j * e_dim + e]) * v[j * m_dim + m];
    std::fill(acc.begin(), acc.end(), 0.0);
    for (int64_t j = c0; j <= l; ++j) {
      const double a = round_double(dot(q + l * e_dim, k + j * e_dim, e_dim));
      for (int64_t m = 0; m < m_dim; ++m) acc[size_t(m)] += a * v[j * m_dim + m];
    }
    for (int64_t e = 0; e < e_dim; ++e)
      for (int64_t m = 0; m < m_dim; ++m)
        acc[size_t(m)] += double(q[l * e_dim + e]) * round_double(state[size_t(e * m_dim + m)]);
    for (int64_t m = 0; m < m_dim; ++m) out[l * m_dim + m] = static_cast<float>(acc[size_t(m)]);
  }
}

// The bf16 gradients of one row: dq by a forward pass over S = sum_{j < chunk(l)} k_j v_j^T,
// dk, dv by a reverse pass over R = sum_{i >= chunk(j) + chunk length} q_i dout_i^T.
void bf16_backward_row(const CausalLinearAttentionShape& s, const float* q, const float* k,
                       const float* v, const float* dout, float* dq, float* dk, float* dv) {
  const int64_t t_len = s.length, e_dim = s.key_dim, m_dim = s.value_dim;
  std::vector<double> state(static_cast<size_t>(e_dim * m_dim), 0.0);
  for (int64_t l = 0; l < t_len; ++l) {
    const int64_t c0 = chunk_start(l);
    if (l == c0 && l > 0)
      for (int64_t j = c0 - kCausalLinearChunk; j < c0; ++j)
        for (int64_t e = 0; e < e_dim; ++e)
          for (int64_t m = 0; m < m_dim; ++m)
            state[size_t(e * m_dim + m)] += double(k[j * e_dim + e]) * v[j * m_dim + m];
    for (int64_t e = 0; e < e_dim; ++e) {
      double acc = 0;
      for (int64_t j = c0; j <= l; ++j)
        acc += round_double(dot(dout + l * m_dim, v + j * m_dim, m_dim)) * k[j * e_dim + e];
      for (int64_t m = 0; m < m_dim; ++m)
        acc += double(dout[l * m_dim + m]) * round_double(state[size_t(e * m_dim + m)]);
      dq[l * e_dim + e] = static_cast<float>(acc);
    }
  }
  std::fill(state.begin(), state.end(), 0.0);  // now R
  for (int64_t j = t_len - 1; j >= 0; --j) {
    const int64_t c0 = chunk_start(j), c1 = std::min(t_len, c0 + kCausalLinearChunk);
    if (j == c1 - 1 && c1 < t_len)  // R now holds every i >= c1
      for (int64_t i = c1; i < std::min(t_len, c1 + kCausalLinearChunk); ++i)
        for (int64_t e = 0; e < e_dim; ++e)
          for (int64_t m = 0; m < m_dim; ++m)
            state[size_t(e * m_dim + m)] += double(q[i * e_dim + e]) * dout[i * m_dim + m];
    for (int64_t m = 0; m < m_dim; ++m) {
      double acc = 0;
      for (int64_t i = j; i < c1; ++i)
        acc += round_double(dot(q + i * e_dim, k + j * e_dim, e_dim)) * dout[i * m_dim + m];
      for (int64_t e = 0; e < e_dim; ++e)
        acc += double(k[j * e_dim + e]) * round_double(state[size_t(e * m_dim + m)]);
      dv[j * m_dim + m] = static_cast<float>(acc);
    }
    for (int64_t e = 0; e < e_dim; ++e) {
      double acc = 0;
      for (int64_t i = j; i < c1; ++i)
        acc += round_double(dot(dout + i * m_dim, v + j * m_dim, m_dim)) * q[i * e_dim + e];
      for (int64_t m = 0; m < m_dim; ++m)
        acc += double(v[j * m_dim + m]) * round_double(state[size_t(e * m_dim + m)]);
      dk[j * e_dim + e] = static_cast<float>(acc);
    }
  }
}

}  // namespace

void causal_linear_attention_reference_forward(const CausalLinearAttentionShape& s, const float* q,
                                               const float* k, const float* v, float* out) {
  const int64_t t_len = s.length, e_dim = s.key_dim, m_dim = s.value_dim;
  if (s.bf16) {
    const int64_t qk = t_len * e_dim, vo = t_len * m_dim;
    for (int64_t r = 0; r < s.rows; ++r)
      bf16_forward_row(s, rounded(q + r * qk, qk).data(), rounded(k + r * qk, qk).data(),
                       rounded(v + r * vo, vo).data(), out + r * vo);
    return;
  }
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
  if (s.bf16) {
    const int64_t qk = t_len * e_dim, vo = t_len * m_dim;
    for (int64_t r = 0; r < s.rows; ++r)
      bf16_backward_row(s, rounded(q + r * qk, qk).data(), rounded(k + r * qk, qk).data(),
                        rounded(v + r * vo, vo).data(), rounded(dout + r * vo, vo).data(),
                        dq + r * qk, dk + r * qk, dv + r * vo);
    return;
  }
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
