// top_p. HF sorts ascending and removes tokens whose ascending cumulative mass is <= 1 - p;
// in exact arithmetic that is: walking the tokens in descending probability, remove token i
// once the mass of the tokens before it, S_{i-1}, is >= p. That is what is computed here, in
// double, with "reaches p" meaning S >= p - kMassTolerance (logits_math.hpp) so that a prefix
// whose exact mass equals p (HF #18976) is enough whatever the float rounding. Ties in
// probability are ordered by lower id first. p = 1 returns at once (llama.cpp does the same;
// in HF it also removes nothing but tokens whose probability underflows to 0). p = 0 keeps
// min_tokens_to_keep tokens (HF #19839 produced NaN there).
#include "top_p.hpp"

#include <cmath>
#include <string>

#include "logits_math.hpp"

namespace sampler_basic {

TopP::TopP(double p, int64_t min_tokens_to_keep)
    : p_(p), min_tokens_to_keep_(static_cast<size_t>(min_tokens_to_keep)) {
  if (!(p >= 0.0 && p <= 1.0) || min_tokens_to_keep < 1) {
    throw patchbay::PluginError(PB_STATUS_INVALID_ARGUMENT,
                                "top_p: p = " + std::to_string(p) +
                                    " must lie in [0, 1] and min_tokens_to_keep (" +
                                    std::to_string(min_tokens_to_keep) + ") must be >= 1");
  }
}

void TopP::apply(std::span<float> logits, std::span<const int32_t>, size_t) {
  check_logits(logits, "top_p");
  if (p_ >= 1.0) return;
  const SoftmaxNorm norm = softmax_norm(logits);
  LazySorted sorted(finite_ids(logits), ByLogitDescending{logits});
  std::vector<int32_t> kept;
  double mass_before = 0.0;
  for (size_t rank = 0; rank < sorted.size(); ++rank) {
    if (rank >= min_tokens_to_keep_ && mass_before >= p_ - kMassTolerance) break;
    kept.push_back(sorted.at(rank));
    mass_before += norm.prob(logits[kept.back()]);
  }
  keep_only(logits, kept);
}

}  // namespace sampler_basic
