// temperature: z_i <- z_i / T for finite z_i; -inf stays -inf (see README.md).
#include "temperature.hpp"

#include <cmath>
#include <string>

#include "logits_math.hpp"

namespace sampler_basic {

Temperature::Temperature(double temperature) : temperature_(static_cast<float>(temperature)) {
  if (!(temperature > 0.0) || !std::isfinite(temperature)) {
    throw patchbay::PluginError(
        PB_STATUS_INVALID_ARGUMENT,
        "temperature: T = " + std::to_string(temperature) +
            " is not allowed; T must be > 0 (for argmax decoding use the `greedy` selector)");
  }
}

namespace {

// A select, not a branch, so the loop vectorises; -inf stays -inf even where T overflows to
// +inf in f32 (-inf / inf would be NaN).
SAMPLER_BASIC_ISA_CLONES void divide_finite(float* z, size_t n, float temperature) {
  for (size_t i = 0; i < n; ++i) z[i] = z[i] == -INFINITY ? z[i] : z[i] / temperature;
}

}  // namespace

void Temperature::apply(std::span<float> logits, std::span<const int32_t>, size_t) {
  check_logits(logits, "temperature");
  divide_finite(logits.data(), logits.size(), temperature_);
}

}  // namespace sampler_basic
