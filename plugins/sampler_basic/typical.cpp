// typical. Over the finite logits, in double: log p_i (log-softmax), H = -sum p_i log p_i,
// score_i = |-log p_i - H|. Sort by score ascending (ties: lower id first), accumulate p; the
// boundary is the first position whose cumulative mass reaches `mass` (>= mass -
// kMassTolerance; HF: last_ind = count(cum < mass), clamped to n-1). Every token whose score
// is <= the boundary score is kept (HF removes score > boundary score), plus the first
// min_tokens_to_keep in that order. mass = 1 is a no-op.
#include "typical.hpp"

#include <algorithm>
#include <cmath>
#include <numeric>
#include <string>

#include "logits_math.hpp"

namespace sampler_basic {

Typical::Typical(double mass, int64_t min_tokens_to_keep)
    : mass_(mass), min_tokens_to_keep_(static_cast<size_t>(min_tokens_to_keep)) {
  if (!(mass >= 0.0 && mass <= 1.0) || min_tokens_to_keep < 1) {
    throw patchbay::PluginError(PB_STATUS_INVALID_ARGUMENT, "typical: mass = " + std::to_string(mass) +
                                " must lie in [0, 1] and min_tokens_to_keep (" +
                                std::to_string(min_tokens_to_keep) + ") must be >= 1");
  }
}

void Typical::apply(std::span<float> logits, std::span<const int32_t>, size_t) {
  check_logits(logits, "typical");
  if (mass_ >= 1.0) return;
  std::vector<int32_t> ids = finite_ids_descending(logits);
  if (ids.empty()) return;
  const std::vector<double> probs = softmax_of(logits, ids);
  double entropy = 0.0;
  for (double p : probs) {
    if (p > 0.0) entropy -= p * std::log(p);
  }
  // score of position j in `ids`; a probability that underflowed to 0 scores +inf (last).
  std::vector<double> score(ids.size());
  for (size_t j = 0; j < ids.size(); ++j) {
    score[j] = probs[j] > 0.0 ? std::fabs(-std::log(probs[j]) - entropy) : INFINITY;
  }
  std::vector<size_t> order(ids.size());
  std::iota(order.begin(), order.end(), size_t{0});
  std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) {
    if (score[a] != score[b]) return score[a] < score[b];
    return ids[a] < ids[b];
  });
  size_t boundary = order.size() - 1;
  double cumulative = 0.0;
  for (size_t r = 0; r < order.size(); ++r) {
    cumulative += probs[order[r]];
    if (cumulative >= mass_ - kMassTolerance) {
      boundary = r;
      break;
    }
  }
  const double boundary_score = score[order[boundary]];
  for (size_t r = 0; r < order.size(); ++r) {
    const size_t j = order[r];
    if (r >= min_tokens_to_keep_ && score[j] > boundary_score) logits[ids[j]] = -INFINITY;
  }
}


}  // namespace sampler_basic
