// repetition_penalty: once per distinct token of the window, sign-dependent scaling. Not
// shift-invariant (adding a constant to all logits changes the result; oobabooga #3627);
// -inf stays -inf because r > 0.
#include "repetition_penalty.hpp"

#include <cmath>
#include <string>
#include <vector>

#include "logits_math.hpp"

namespace sampler_basic {

RepetitionPenalty::RepetitionPenalty(double penalty, int64_t last_n, bool include_prompt)
    : penalty_(static_cast<float>(penalty)), last_n_(last_n), include_prompt_(include_prompt) {
  if (!(penalty > 0.0) || !std::isfinite(penalty) || last_n < 0) {
    throw patchbay::PluginError(PB_STATUS_INVALID_ARGUMENT,
                                "repetition_penalty: penalty = " + std::to_string(penalty) +
                                    " must be > 0 (1 = no penalty) and last_n (" +
                                    std::to_string(last_n) + ") must be >= 0 (0 = all)");
  }
}

void RepetitionPenalty::apply(std::span<float> logits, std::span<const int32_t> history,
                              size_t prompt_len) {
  check_logits(logits, "repetition_penalty");
  check_history(history, prompt_len, logits.size(), "repetition_penalty");
  std::vector<char> seen(logits.size(), 0);
  for (int32_t id : history_window(history, prompt_len, include_prompt_, last_n_)) {
    if (seen[id]) continue;
    seen[id] = 1;
    float& z = logits[id];
    z = z > 0.0f ? z / penalty_ : z * penalty_;
  }
}

}  // namespace sampler_basic
