// Helpers of the sampler tests (see sampler_test_util.hpp).
#include "sampler_test_util.hpp"

#include <cmath>

namespace sampler_test {

std::vector<float> logits_of(std::initializer_list<double> probs) {
  std::vector<float> out;
  for (double p : probs) out.push_back(p > 0 ? static_cast<float>(std::log(p)) : -INFINITY);
  return out;
}

std::vector<int32_t> kept(std::span<const float> logits) {
  std::vector<int32_t> ids;
  for (size_t i = 0; i < logits.size(); ++i) {
    if (std::isfinite(logits[i])) ids.push_back(static_cast<int32_t>(i));
  }
  return ids;
}

std::vector<float> applied(patchbay::Sampler& s, std::vector<float> logits,
                           std::vector<int32_t> history, size_t prompt_len) {
  s.apply(logits, history, prompt_len);
  return logits;
}

}  // namespace sampler_test
