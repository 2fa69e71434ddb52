// CPU twin of the fused causal attention (attention_reference.hpp): scores, softmax and the
// gradient through them written out per head, in double.
#include "patchbay/kernels/cuda/attention_reference.hpp"

#include <cmath>
#include <vector>

namespace patchbay::kernels::cuda {
namespace {

// probabilities[i][j] (j <= i) of one head, and each row's log-sum-exp of the scaled scores.
void head_probabilities(const float* q, const float* k, int64_t steps, int64_t dim, double scale,
                        std::vector<double>& probabilities, std::vector<double>& lse) {
  probabilities.assign(size_t(steps * steps), 0.0);
  lse.assign(size_t(steps), 0.0);
  for (int64_t i = 0; i < steps; ++i) {
    double max = -INFINITY;
    for (int64_t j = 0; j <= i; ++j) {
      double s = 0.0;
      for (int64_t d = 0; d < dim; ++d) s += double(q[i * dim + d]) * k[j * dim + d];
      probabilities[size_t(i * steps + j)] = s * scale;
      max = std::fmax(max, s * scale);
    }
    double sum = 0.0;
    for (int64_t j = 0; j <= i; ++j) sum += std::exp(probabilities[size_t(i * steps + j)] - max);
    lse[size_t(i)] = max + std::log(sum);
    for (int64_t j = 0; j <= i; ++j)
      probabilities[size_t(i * steps + j)] =
          std::exp(probabilities[size_t(i * steps + j)] - lse[size_t(i)]);
  }
}

}  // namespace

void causal_attention_forward_reference(const float* q, const float* k, const float* v, float* out,
                                        float* lse, int64_t batch_heads, int64_t steps,
                                        int64_t head_dim, float scale) {
  std::vector<double> p, row_lse;
  for (int64_t h = 0; h < batch_heads; ++h) {
    const int64_t offset = h * steps * head_dim;
    head_probabilities(q + offset, k + offset, steps, head_dim, scale, p, row_lse);
    for (int64_t i = 0; i < steps; ++i) {
      for (int64_t d = 0; d < head_dim; ++d) {
        double sum = 0.0;
        for (int64_t j = 0; j <= i; ++j)
          sum += p[size_t(i * steps + j)] * v[offset + j * head_dim + d];
        out[offset + i * head_dim + d] = static_cast<float>(sum);
      }
      lse[h * steps + i] = static_cast<float>(row_lse[size_t(i)]);
    }
  }
}

void causal_attention_backward_reference(const float* q, const float* k, const float* v,
                                         const float* dout, float* dq, float* dk, float* dv,
                                         int64_t batch_heads, int64_t steps, int64_t head_dim,
                                         float scale) {
  std::vector<double> p, row_lse;
  for (int64_t h = 0; h < batch_heads; ++h) {
    const int64_t offset = h * steps * head_dim;
    const float* qh = q + offset;
    const float* kh = k + offset;
    const float* vh = v + offset;
    const float* doh = dout + offset;
    head_probabilities(qh, kh, steps, head_dim, scale, p, row_lse);
    std::vector<double> dq_h(size_t(steps * head_dim), 0.0), dk_h(dq_h), dv_h(dq_h);
    for (int64_t i = 0; i < steps; ++i) {
      // dP_ij = dO_i . V_j; dS_ij = P_ij (dP_ij - sum_l P_il dP_il)
      std::vector<double> dp(size_t(i + 1));
      double row_dot = 0.0;
      for (int64_t j = 0; j <= i; ++j) {
        double s = 0.0;
        for (int64_t d = 0; d < head_dim; ++d)
          s += double(doh[i * head_dim + d]) * vh[j * head_dim + d];
        dp[size_t(j)] = s;
        row_dot += p[size_t(i * steps + j)] * s;
      }
      for (int64_t j = 0; j <= i; ++j) {
        const double pij = p[size_t(i * steps + j)];
        const double ds = pij * (dp[size_t(j)] - row_dot) * scale;
        for (int64_t d = 0; d < head_dim; ++d) {
          dv_h[size_t(j * head_dim + d)] += pij * doh[i * head_dim + d];
          dq_h[size_t(i * head_dim + d)] += ds * kh[j * head_dim + d];
          dk_h[size_t(j * head_dim + d)] += ds * qh[i * head_dim + d];
        }
      }
    }
    for (int64_t e = 0; e < steps * head_dim; ++e) {
      dq[offset + e] = static_cast<float>(dq_h[size_t(e)]);
      dk[offset + e] = static_cast<float>(dk_h[size_t(e)]);
      dv[offset + e] = static_cast<float>(dv_h[size_t(e)]);
    }
  }
}

}  // namespace patchbay::kernels::cuda
