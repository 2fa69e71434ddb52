// exp for f32 written so that loops calling it vectorise (no libm call, no branches):
// Cody-Waite range reduction x = n·ln2 + r, |r| ≤ ln2/2, a degree-6 polynomial for e^r
// (the Cephes expf coefficients) and 2^n built in the exponent bits. Relative error within
// a few ulp of the correctly rounded result on [-87, 88] (tests/kernels_indexing checks
// it against double-precision exp); 0 below -87 (where expf is subnormal, < 2e-38), and
// inputs above 88 are clamped to 88 (callers here only pass x ≤ 0). NaN propagates.
// Used by the cross-entropy kernels, where a scalar libm expf call per logit was the whole
// cost.
#pragma once

#include <bit>
#include <cstdint>

namespace patchbay::kernels {

inline float exp_f32(float x) {
  constexpr float kLog2e = 1.44269504088896341f;
  constexpr float kLn2High = 0.693359375f;  // ln2 split so n·kLn2High is exact
  constexpr float kLn2Low = -2.12194440e-4f;
  constexpr float kRoundMagic = 12582912.0f;  // 1.5·2^23: adding it rounds to an integer
  // Selects rather than std::min/max, so the loop stays branch-free after if-conversion;
  // NaN fails both comparisons and flows through to the result.
  const float low_clamped = x < -87.0f ? -87.0f : x;
  const float clamped = low_clamped > 88.0f ? 88.0f : low_clamped;
  const float shifted = clamped * kLog2e + kRoundMagic;
  const int32_t n = std::bit_cast<int32_t>(shifted) - std::bit_cast<int32_t>(kRoundMagic);
  const float n_float = shifted - kRoundMagic;
  const float r = (clamped - n_float * kLn2High) - n_float * kLn2Low;
  float p = 1.9875691500e-4f;
  p = p * r + 1.3981999507e-3f;
  p = p * r + 8.3334519073e-3f;
  p = p * r + 4.1665795894e-2f;
  p = p * r + 1.6666665459e-1f;
  p = p * r + 5.0000001201e-1f;
  p = p * r * r + r + 1.0f;
  const float two_to_n = std::bit_cast<float>((n + 127) << 23);
  const float result = p * two_to_n;
  return x < -87.0f ? 0.0f : result;
}

}  // namespace patchbay::kernels
