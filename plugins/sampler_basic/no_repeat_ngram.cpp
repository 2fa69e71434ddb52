// no_repeat_ngram. With s the sequence (history, or its generated part without
// include_prompt) and L = len(s): nothing happens while L < n - 1 (HF: cur_len + 1 < n).
// Otherwise the last n-1 tokens are the prefix; for every start i in [0, L - n], if
// s[i, i+n-1) equals the prefix, s[i+n-1] is banned. n = 1 bans every token seen.
// If the bans would leave no finite logit, apply() fails (patchbay::PluginError
// (PB_STATUS_INVALID_ARGUMENT)) rather than hand the selector an all -inf vector (HF would sample
// from NaN there).
#include "no_repeat_ngram.hpp"

#include <algorithm>
#include <cmath>
#include <string>

#include "logits_math.hpp"

namespace sampler_basic {

NoRepeatNgram::NoRepeatNgram(int64_t n, bool include_prompt)
    : n_(static_cast<size_t>(n)), include_prompt_(include_prompt) {
  if (n < 1) {
    throw patchbay::PluginError(PB_STATUS_INVALID_ARGUMENT,
                                "no_repeat_ngram: n = " + std::to_string(n) + " must be >= 1");
  }
}

void NoRepeatNgram::apply(std::span<float> logits, std::span<const int32_t> history,
                          size_t prompt_len) {
  check_logits(logits, "no_repeat_ngram");
  check_history(history, prompt_len, logits.size(), "no_repeat_ngram");
  const std::span<const int32_t> s = history_window(history, prompt_len, include_prompt_, 0);
  if (s.size() + 1 < n_) return;
  const std::span<const int32_t> prefix = s.last(n_ - 1);
  std::vector<int32_t> banned;
  for (size_t start = 0; start + n_ <= s.size(); ++start) {
    if (std::equal(prefix.begin(), prefix.end(), s.begin() + static_cast<std::ptrdiff_t>(start))) {
      banned.push_back(s[start + n_ - 1]);
    }
  }
  if (banned.empty()) return;
  const auto is_finite = [](float z) { return std::isfinite(z); };
  const bool had_finite = std::any_of(logits.begin(), logits.end(), is_finite);
  std::vector<float> updated(logits.begin(), logits.end());
  for (int32_t id : banned) updated[id] = -INFINITY;
  if (had_finite && std::none_of(updated.begin(), updated.end(), is_finite)) {
    throw patchbay::PluginError(
        PB_STATUS_INVALID_ARGUMENT,
        "no_repeat_ngram: every allowed token would repeat an existing " + std::to_string(n_) +
            "-gram; no token is left to choose (lower n or reorder the chain)");
  }
  std::copy(updated.begin(), updated.end(), logits.begin());
}

}  // namespace sampler_basic
