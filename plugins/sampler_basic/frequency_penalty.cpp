// frequency_penalty: z_j -= c_j * alpha_f over the window; -inf stays -inf.
#include "frequency_penalty.hpp"

#include <cmath>
#include <string>
#include <vector>

#include "logits_math.hpp"

namespace sampler_basic {

FrequencyPenalty::FrequencyPenalty(double penalty, int64_t last_n, bool include_prompt)
    : penalty_(static_cast<float>(penalty)), last_n_(last_n), include_prompt_(include_prompt) {
  if (!std::isfinite(penalty) || last_n < 0) {
    throw patchbay::PluginError(PB_STATUS_INVALID_ARGUMENT,
                                "frequency_penalty: penalty = " + std::to_string(penalty) +
                                    " must be finite and last_n (" + std::to_string(last_n) +
                                    ") must be >= 0 (0 = all)");
  }
}

void FrequencyPenalty::apply(std::span<float> logits, std::span<const int32_t> history,
                             size_t prompt_len) {
  check_logits(logits, "frequency_penalty");
  check_history(history, prompt_len, logits.size(), "frequency_penalty");
  std::vector<int32_t> count(logits.size(), 0);
  for (int32_t id : history_window(history, prompt_len, include_prompt_, last_n_)) ++count[id];
  for (size_t j = 0; j < logits.size(); ++j) {
    if (count[j] > 0 && std::isfinite(logits[j])) {
      logits[j] -= static_cast<float>(count[j]) * penalty_;
    }
  }
}

}  // namespace sampler_basic
