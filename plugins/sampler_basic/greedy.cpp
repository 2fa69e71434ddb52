// greedy: one ascending scan keeping the first strict maximum, so ties go to the lowest id.
#include "greedy.hpp"

#include <cmath>

#include "logits_math.hpp"

namespace sampler_basic {

int32_t Greedy::select(std::span<const float> logits) {
  check_logits(logits, "greedy");
  int32_t best = -1;
  for (size_t i = 0; i < logits.size(); ++i) {
    if (std::isfinite(logits[i]) && (best < 0 || logits[i] > logits[best])) {
      best = static_cast<int32_t>(i);
    }
  }
  if (best < 0)
    throw patchbay::PluginError(PB_STATUS_INVALID_ARGUMENT,
                                "greedy: no finite logit; every token was removed");
  return best;
}

}  // namespace sampler_basic
