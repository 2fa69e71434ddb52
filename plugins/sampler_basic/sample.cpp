// sample: weights w_i = exp(z_i - z_max) in double over the finite logits in id order, one
// uniform draw u in [0,1) (splitmix64, 53 bits), the first id whose running weight exceeds
// u * sum(w). One generator step per select().
#include "sample.hpp"

#include <cmath>
#include <vector>

namespace sampler_basic {

int32_t Sample::select(std::span<const float> logits) {
  check_logits(logits, "sample");
  float max_logit = -INFINITY;
  for (const float z : logits) max_logit = z > max_logit ? z : max_logit;  // no NaN (checked)
  if (!std::isfinite(max_logit)) {
    throw patchbay::PluginError(PB_STATUS_INVALID_ARGUMENT,
                                "sample: no finite logit; every token was removed");
  }
  weights_.resize(logits.size());
  for (size_t i = 0; i < logits.size(); ++i) {
    weights_[i] = std::isfinite(logits[i])
                     ? std::exp(static_cast<double>(logits[i]) - static_cast<double>(max_logit))
                     : 0.0;
  }
  return static_cast<int32_t>(draw_index(weights_, rng_));
}

}  // namespace sampler_basic
