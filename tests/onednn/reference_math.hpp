// Test helpers for tests/onednn: deterministic random buffers, bf16 rounding, and a
// closeness check that reports the worst element. References are plain loops in double.
#pragma once

#include <doctest/doctest.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <random>
#include <string>
#include <vector>

namespace patchbay::onednn::testing {

inline std::vector<float> random_floats(std::size_t count, std::uint32_t seed, float low = -1.0f,
                                        float high = 1.0f) {
  std::mt19937 generator(seed);
  std::uniform_real_distribution<float> distribution(low, high);
  std::vector<float> values(count);
  for (float& value : values) value = distribution(generator);
  return values;
}

// Round-to-nearest-even f32 -> bf16 bits (inputs here are finite).
inline std::uint16_t to_bf16(float value) {
  std::uint32_t bits = 0;
  std::memcpy(&bits, &value, sizeof bits);
  bits += 0x7FFFu + ((bits >> 16) & 1u);
  return static_cast<std::uint16_t>(bits >> 16);
}

inline float from_bf16(std::uint16_t bf16) {
  const std::uint32_t bits = static_cast<std::uint32_t>(bf16) << 16;
  float value = 0.0f;
  std::memcpy(&value, &bits, sizeof value);
  return value;
}

inline std::vector<std::uint16_t> to_bf16(const std::vector<float>& values) {
  std::vector<std::uint16_t> out(values.size());
  for (std::size_t i = 0; i < values.size(); ++i) out[i] = to_bf16(values[i]);
  return out;
}

inline std::vector<float> from_bf16(const std::vector<std::uint16_t>& values) {
  std::vector<float> out(values.size());
  for (std::size_t i = 0; i < values.size(); ++i) out[i] = from_bf16(values[i]);
  return out;
}

// Checks |actual[i] - expected[i]| <= tolerance[i] for all i; reports the worst offender.
inline void check_close(const std::vector<float>& actual, const std::vector<double>& expected,
                        const std::vector<double>& tolerance, const std::string& what) {
  REQUIRE(actual.size() == expected.size());
  std::size_t worst = 0;
  double worst_ratio = 0.0;
  for (std::size_t i = 0; i < actual.size(); ++i) {
    const double error = std::fabs(static_cast<double>(actual[i]) - expected[i]);
    const double ratio = error / tolerance[i];
    if (!(ratio <= worst_ratio)) {  // also catches NaN
      worst_ratio = ratio;
      worst = i;
    }
  }
  INFO(what << ": worst element " << worst << " actual " << actual[worst] << " expected "
            << expected[worst] << " tolerance " << tolerance[worst]);
  CHECK(worst_ratio <= 1.0);
}

// Same relative/absolute tolerance for every element.
inline void check_close(const std::vector<float>& actual, const std::vector<double>& expected,
                        double relative, double absolute, const std::string& what) {
  std::vector<double> tolerance(expected.size());
  for (std::size_t i = 0; i < expected.size(); ++i) {
    tolerance[i] = absolute + relative * std::fabs(expected[i]);
  }
  check_close(actual, expected, tolerance, what);
}

}  // namespace patchbay::onednn::testing
