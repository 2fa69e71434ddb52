// min_p: threshold z_max + ln(min_p) in double; tokens below it become -inf, except the
// min_tokens_to_keep most probable. min_p = 0 is a no-op; equality is kept.
#include "min_p.hpp"

#include <cmath>
#include <string>

#include "logits_math.hpp"

namespace sampler_basic {

MinP::MinP(double min_p, int64_t min_tokens_to_keep)
    : min_p_(min_p), min_tokens_to_keep_(static_cast<size_t>(min_tokens_to_keep)) {
  if (!(min_p >= 0.0 && min_p <= 1.0) || min_tokens_to_keep < 1) {
    throw patchbay::PluginError(PB_STATUS_INVALID_ARGUMENT, "min_p: min_p = " + std::to_string(min_p) +
                                " must lie in [0, 1] and min_tokens_to_keep (" +
                                std::to_string(min_tokens_to_keep) + ") must be >= 1");
  }
}

void MinP::apply(std::span<float> logits, std::span<const int32_t>, size_t) {
  check_logits(logits, "min_p");
  if (min_p_ <= 0.0) return;
  const std::vector<int32_t> ids = finite_ids_descending(logits);
  if (ids.empty()) return;
  const double threshold = static_cast<double>(logits[ids[0]]) + std::log(min_p_);
  for (size_t i = min_tokens_to_keep_; i < ids.size(); ++i) {
    if (static_cast<double>(logits[ids[i]]) < threshold) logits[ids[i]] = -INFINITY;
  }
}


}  // namespace sampler_basic
