// presence_penalty: z_j -= alpha_p once for every distinct token of the window; -inf stays.
#include "presence_penalty.hpp"

#include <cmath>
#include <string>
#include <vector>

#include "logits_math.hpp"

namespace sampler_basic {

PresencePenalty::PresencePenalty(double penalty, int64_t last_n, bool include_prompt)
    : penalty_(static_cast<float>(penalty)), last_n_(last_n), include_prompt_(include_prompt) {
  if (!std::isfinite(penalty) || last_n < 0) {
    throw patchbay::PluginError(PB_STATUS_INVALID_ARGUMENT,
                                "presence_penalty: penalty = " + std::to_string(penalty) +
                                    " must be finite and last_n (" + std::to_string(last_n) +
                                    ") must be >= 0 (0 = all)");
  }
}

void PresencePenalty::apply(std::span<float> logits, std::span<const int32_t> history,
                            size_t prompt_len) {
  check_logits(logits, "presence_penalty");
  check_history(history, prompt_len, logits.size(), "presence_penalty");
  std::vector<char> seen(logits.size(), 0);
  for (int32_t id : history_window(history, prompt_len, include_prompt_, last_n_)) {
    if (seen[id]) continue;
    seen[id] = 1;
    if (std::isfinite(logits[id])) logits[id] -= penalty_;
  }
}

}  // namespace sampler_basic
