// Epsilon: probabilities by a max-shifted softmax, then the truncation (see epsilon.hpp).
#include "epsilon.hpp"

#include <algorithm>
#include <cmath>
#include <functional>
#include <string>
#include <vector>

namespace epsilon_sampler {

Epsilon::Epsilon(const patchbay::Host&, const patchbay::ConfigView& config)
    : epsilon_(config.get_float("epsilon")),
      min_keep_(static_cast<size_t>(config.get_int("min_tokens_to_keep"))) {}

void Epsilon::apply(std::span<float> logits, std::span<const int32_t>, size_t) {
  float max_logit = -INFINITY;
  for (const float z : logits) {
    if (std::isnan(z) || z == INFINITY)
      throw patchbay::PluginError(PB_STATUS_INVALID_ARGUMENT,
                                  "epsilon: logits must be finite or -inf, found " + std::to_string(z));
    max_logit = std::max(max_logit, z);
  }
  if (max_logit == -INFINITY)
    throw patchbay::PluginError(PB_STATUS_INVALID_ARGUMENT, "epsilon: every logit is -inf");
  double total = 0.0;
  for (const float z : logits) total += std::exp(static_cast<double>(z) - max_logit);
  // The probability of the min_keep-th most probable token: tokens at or above it stay.
  std::vector<float> sorted(logits.begin(), logits.end());
  const size_t keep = std::min(min_keep_, sorted.size());
  std::nth_element(sorted.begin(), sorted.begin() + static_cast<std::ptrdiff_t>(keep - 1),
                   sorted.end(), std::greater<float>());
  const float kept_floor = sorted[keep - 1];
  for (float& z : logits) {
    const double p = std::exp(static_cast<double>(z) - max_logit) / total;
    if (p < epsilon_ && z < kept_floor) z = -INFINITY;
  }
}

}  // namespace epsilon_sampler
