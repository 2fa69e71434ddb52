// mirostat_v1 truncation. Over i < min(m-1, n-1): t_i = ln((i+2)/(i+1)),
// b_i = ln(p_i / p_{i+1}); s = sum t_i b_i / sum t_i^2; eps = s - 1;
// k = (eps * 2^mu / (1 - N^-eps))^(1/s), N = vocabulary size; keep top max(floor(k), 1).
// Guards llama.cpp lacks (it would hit undefined behaviour in int(k)): the sums stop before a
// probability that underflowed to 0; no usable ratio keeps 1 token; |eps| < 1e-12 uses the
// limit 2^mu / ln N; k NaN or >= n keeps all n candidates.
#include "mirostat_v1.hpp"

#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

namespace sampler_basic {

MirostatV1::MirostatV1(double tau, double eta, int64_t m, uint64_t seed)
    : Mirostat("mirostat_v1", tau, eta, seed), m_(m) {
  if (m < 2) {
    throw patchbay::PluginError(PB_STATUS_INVALID_ARGUMENT,
                                "mirostat_v1: m = " + std::to_string(m) +
                                    " must be >= 2 (the Zipf fit needs two probabilities)");
  }
}

size_t MirostatV1::truncation_k(std::span<const double> top_probs, size_t candidate_count,
                                int64_t m, double mu, size_t n_vocab) {
  const size_t n = candidate_count;
  if (n <= 1 || top_probs.size() < 2) return 1;
  const size_t ratios = std::min({static_cast<size_t>(m - 1), n - 1, top_probs.size() - 1});
  double sum_ti_bi = 0.0;
  double sum_ti_sq = 0.0;
  for (size_t i = 0; i < ratios && top_probs[i + 1] > 0.0; ++i) {
    const double t_i = std::log(static_cast<double>(i + 2) / static_cast<double>(i + 1));
    const double b_i = std::log(top_probs[i] / top_probs[i + 1]);
    sum_ti_bi += t_i * b_i;
    sum_ti_sq += t_i * t_i;
  }
  if (sum_ti_sq == 0.0) return 1;
  const double s_hat = sum_ti_bi / sum_ti_sq;
  const double epsilon_hat = s_hat - 1.0;
  const double n_log = std::log(static_cast<double>(n_vocab));
  const double base = std::fabs(epsilon_hat) < 1e-12
                          ? std::exp2(mu) / n_log
                          : epsilon_hat * std::exp2(mu) / (1.0 - std::exp(-epsilon_hat * n_log));
  const double k = std::pow(base, 1.0 / s_hat);
  if (std::isnan(k) || k >= static_cast<double>(n)) return n;
  return std::max<size_t>(static_cast<size_t>(k), 1);
}

size_t MirostatV1::truncation(RankedCandidates& candidates, size_t vocab) const {
  std::vector<double> top(std::min(static_cast<size_t>(m_), candidates.size()));
  for (size_t rank = 0; rank < top.size(); ++rank) top[rank] = candidates.prob(rank);
  return truncation_k(top, candidates.size(), m_, mu(), vocab);
}

}  // namespace sampler_basic
