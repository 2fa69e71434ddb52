// min_p: threshold z_max + ln(min_p) in double; tokens below it become -inf, except the
// min_tokens_to_keep most probable. min_p = 0 is a no-op; equality is kept.
#include "min_p.hpp"

#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "logits_math.hpp"

namespace sampler_basic {

MinP::MinP(double min_p, int64_t min_tokens_to_keep)
    : min_p_(min_p), min_tokens_to_keep_(static_cast<size_t>(min_tokens_to_keep)) {
  if (!(min_p >= 0.0 && min_p <= 1.0) || min_tokens_to_keep < 1) {
    throw patchbay::PluginError(PB_STATUS_INVALID_ARGUMENT,
                                "min_p: min_p = " + std::to_string(min_p) +
                                    " must lie in [0, 1] and min_tokens_to_keep (" +
                                    std::to_string(min_tokens_to_keep) + ") must be >= 1");
  }
}

void MinP::apply(std::span<float> logits, std::span<const int32_t>, size_t) {
  check_logits(logits, "min_p");
  if (min_p_ <= 0.0) return;
  const SoftmaxNorm norm = softmax_norm(logits);
  if (!std::isfinite(norm.max_logit)) return;
  const double threshold = norm.max_logit + std::log(min_p_);
  size_t above = 0;
  for (float z : logits) above += std::isfinite(z) && static_cast<double>(z) >= threshold;
  std::vector<int32_t> kept;
  if (above < min_tokens_to_keep_) {  // the min_tokens_to_keep most probable
    LazySorted sorted(finite_ids(logits), ByLogitDescending{logits});
    for (size_t rank = 0; rank < std::min(min_tokens_to_keep_, sorted.size()); ++rank) {
      kept.push_back(sorted.at(rank));
    }
  } else {
    for (size_t i = 0; i < logits.size(); ++i) {
      if (std::isfinite(logits[i]) && static_cast<double>(logits[i]) >= threshold) {
        kept.push_back(static_cast<int32_t>(i));
      }
    }
  }
  keep_only(logits, kept);
}

}  // namespace sampler_basic
