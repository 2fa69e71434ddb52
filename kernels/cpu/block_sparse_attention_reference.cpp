// Naive reference of the block-sparse attention kernel: for every query row, the dense row
// of Tk scores with block_sparse_visible() as a mask, softmax and products in double. It is
// O(Tq * Tk) on purpose (the oracle the tests compare the sparse kernel against).
#include <cmath>
#include <limits>
#include <vector>

#include "patchbay/kernels/block_sparse_attention.hpp"

namespace patchbay::kernels {
namespace {

// Probabilities of row (b, h, i) over all Tk keys (0 where not visible); empty row -> zeros.
std::vector<double> row_probabilities(const BlockSparseParams& p, std::int64_t b, std::int64_t h,
                                      std::int64_t i, double& lse) {
  const std::int64_t dim = p.head_dim, hk = h / (p.heads / p.kv_heads);
  const float* q = p.q + ((b * p.heads + h) * p.q_len + i) * dim;
  std::vector<double> score(static_cast<size_t>(p.kv_len), 0.0);
  double max_score = -std::numeric_limits<double>::infinity();
  for (std::int64_t j = 0; j < p.kv_len; ++j) {
    if (!block_sparse_visible(p, h, i, j)) continue;
    const float* k = p.k + ((b * p.kv_heads + hk) * p.kv_len + j) * dim;
    double acc = 0;
    for (std::int64_t d = 0; d < dim; ++d) acc += double(q[d]) * k[d];
    score[j] = acc * p.scale;
    max_score = std::max(max_score, score[j]);
  }
  double sum = 0;
  for (std::int64_t j = 0; j < p.kv_len; ++j)
    if (block_sparse_visible(p, h, i, j)) sum += std::exp(score[j] - max_score);
  lse = sum > 0 ? max_score + std::log(sum) : -std::numeric_limits<double>::infinity();
  std::vector<double> prob(static_cast<size_t>(p.kv_len), 0.0);
  if (sum > 0)
    for (std::int64_t j = 0; j < p.kv_len; ++j)
      if (block_sparse_visible(p, h, i, j)) prob[j] = std::exp(score[j] - lse);
  return prob;
}

}  // namespace

std::string block_sparse_attention_reference_forward(const BlockSparseParams& p) {
  if (std::string err = block_sparse_params_error(p, false); !err.empty()) return err;
  const std::int64_t dim = p.head_dim;
  for (std::int64_t b = 0; b < p.batch; ++b)
    for (std::int64_t h = 0; h < p.heads; ++h) {
      const std::int64_t hk = h / (p.heads / p.kv_heads);
      for (std::int64_t i = 0; i < p.q_len; ++i) {
        double lse = 0;
        std::vector<double> prob = row_probabilities(p, b, h, i, lse);
        const std::int64_t row = (b * p.heads + h) * p.q_len + i;
        for (std::int64_t d = 0; d < dim; ++d) {
          double acc = 0;
          for (std::int64_t j = 0; j < p.kv_len; ++j)
            acc += prob[j] * p.v[((b * p.kv_heads + hk) * p.kv_len + j) * dim + d];
          p.out[row * dim + d] = static_cast<float>(acc);
        }
        p.lse[row] = static_cast<float>(lse);
      }
    }
  return {};
}

std::string block_sparse_attention_reference_backward(const BlockSparseParams& p) {
  if (std::string err = block_sparse_params_error(p, true); !err.empty()) return err;
  const std::int64_t dim = p.head_dim;
  std::vector<double> dq(static_cast<size_t>(p.batch * p.heads * p.q_len * dim), 0.0);
  std::vector<double> dk(static_cast<size_t>(p.batch * p.kv_heads * p.kv_len * dim), 0.0);
  std::vector<double> dv(dk.size(), 0.0);
  for (std::int64_t b = 0; b < p.batch; ++b)
    for (std::int64_t h = 0; h < p.heads; ++h) {
      const std::int64_t hk = h / (p.heads / p.kv_heads);
      for (std::int64_t i = 0; i < p.q_len; ++i) {
        double lse = 0;
        std::vector<double> prob = row_probabilities(p, b, h, i, lse);
        const std::int64_t row = (b * p.heads + h) * p.q_len + i;
        const float* dout = p.dout + row * dim;
        std::vector<double> out(static_cast<size_t>(dim), 0.0);
        for (std::int64_t j = 0; j < p.kv_len; ++j)
          for (std::int64_t d = 0; d < dim; ++d)
            out[d] += prob[j] * p.v[((b * p.kv_heads + hk) * p.kv_len + j) * dim + d];
        double delta = 0;
        for (std::int64_t d = 0; d < dim; ++d) delta += dout[d] * out[d];
        for (std::int64_t j = 0; j < p.kv_len; ++j) {
          if (prob[j] == 0) continue;
          const std::int64_t kv = ((b * p.kv_heads + hk) * p.kv_len + j) * dim;
          double dp = 0;
          for (std::int64_t d = 0; d < dim; ++d) dp += double(dout[d]) * p.v[kv + d];
          const double ds = prob[j] * (dp - delta) * p.scale;
          for (std::int64_t d = 0; d < dim; ++d) {
            dv[kv + d] += prob[j] * dout[d];
            dq[row * dim + d] += ds * p.k[kv + d];
            dk[kv + d] += ds * p.q[row * dim + d];
          }
        }
      }
    }
  for (size_t n = 0; n < dq.size(); ++n) p.dq[n] = static_cast<float>(dq[n]);
  for (size_t n = 0; n < dk.size(); ++n) {
    p.dk[n] = static_cast<float>(dk[n]);
    p.dv[n] = static_cast<float>(dv[n]);
  }
  return {};
}

}  // namespace patchbay::kernels
