// typical. Over the finite logits, in double: log p_i (log-softmax), H = -sum p_i log p_i,
// score_i = |-log p_i - H|. Sort by score ascending (ties: lower id first), accumulate p; the
// boundary is the first position whose cumulative mass reaches `mass` (>= mass -
// kMassTolerance; HF: last_ind = count(cum < mass), clamped to n-1). Every token whose score
// is <= the boundary score is kept (HF removes score > boundary score), plus the first
// min_tokens_to_keep in that order. mass = 1 is a no-op.
#include "typical.hpp"

#include <algorithm>
#include <cmath>
#include <string>

#include "logits_math.hpp"

namespace sampler_basic {

Typical::Typical(double mass, int64_t min_tokens_to_keep)
    : mass_(mass), min_tokens_to_keep_(static_cast<size_t>(min_tokens_to_keep)) {
  if (!(mass >= 0.0 && mass <= 1.0) || min_tokens_to_keep < 1) {
    throw patchbay::PluginError(PB_STATUS_INVALID_ARGUMENT,
                                "typical: mass = " + std::to_string(mass) +
                                    " must lie in [0, 1] and min_tokens_to_keep (" +
                                    std::to_string(min_tokens_to_keep) + ") must be >= 1");
  }
}

void Typical::apply(std::span<float> logits, std::span<const int32_t>, size_t) {
  check_logits(logits, "typical");
  if (mass_ >= 1.0) return;
  const SoftmaxNorm norm = softmax_norm(logits);
  if (!std::isfinite(norm.max_logit)) return;
  // log p_i and p_i per id (finite ids only); H over them.
  std::vector<double> prob(logits.size(), 0.0);
  double entropy = 0.0;
  for (size_t i = 0; i < logits.size(); ++i) {
    if (!std::isfinite(logits[i])) continue;
    prob[i] = norm.prob(logits[i]);
    if (prob[i] > 0.0) entropy -= prob[i] * std::log(prob[i]);
  }
  // score per id; a probability that underflowed to 0 scores +inf (last).
  std::vector<double> score(logits.size(), INFINITY);
  for (size_t i = 0; i < logits.size(); ++i) {
    if (prob[i] > 0.0) score[i] = std::fabs(-std::log(prob[i]) - entropy);
  }
  const auto by_score = [&score](int32_t a, int32_t b) {
    return score[a] < score[b] || (score[a] == score[b] && a < b);
  };
  LazySorted sorted(finite_ids(logits), by_score);
  size_t boundary = sorted.size() - 1;
  double cumulative = 0.0;
  for (size_t rank = 0; rank < sorted.size(); ++rank) {
    cumulative += prob[sorted.at(rank)];
    if (cumulative >= mass_ - kMassTolerance) {
      boundary = rank;
      break;
    }
  }
  const double boundary_score = score[sorted.at(boundary)];
  std::vector<int32_t> kept;
  for (size_t rank = 0; rank < std::min(min_tokens_to_keep_, sorted.size()); ++rank) {
    kept.push_back(sorted.at(rank));
  }
  for (size_t i = 0; i < logits.size(); ++i) {  // ties with the boundary score are kept (HF)
    if (std::isfinite(logits[i]) && score[i] <= boundary_score) {
      kept.push_back(static_cast<int32_t>(i));
    }
  }
  std::sort(kept.begin(), kept.end());
  kept.erase(std::unique(kept.begin(), kept.end()), kept.end());
  keep_only(logits, kept);
}

}  // namespace sampler_basic
