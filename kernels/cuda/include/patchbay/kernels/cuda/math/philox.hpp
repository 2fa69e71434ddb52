// Philox4x32-10 (Salmon et al., "Parallel random numbers: as easy as 1, 2, 3", SC'11; the
// Random123 library's philox4x32 with 10 rounds): a counter-based generator, so any thread of
// a kernel (or the CPU twin) draws the numbers of element i from (counter = i, key = seed)
// alone, with no state to carry. Tested against Random123's known-answer vectors
// (tests/cuda/math_philox_test.cpp). Helpers map the 32-bit outputs to uniform and normal floats.
#pragma once

#include <cmath>
#include <cstdint>

#include "patchbay/kernels/cuda/math/host_device.hpp"

namespace patchbay::kernels::cuda::math {

struct PhiloxBlock {
  uint32_t word[4];
};
struct PhiloxKey {
  uint32_t word[2];
};

namespace detail {
constexpr uint32_t kPhiloxMultiplier0 = 0xD2511F53u;
constexpr uint32_t kPhiloxMultiplier1 = 0xCD9E8D57u;
constexpr uint32_t kPhiloxWeyl0 = 0x9E3779B9u;  // golden ratio
constexpr uint32_t kPhiloxWeyl1 = 0xBB67AE85u;  // sqrt(3) - 1

PATCHBAY_HD uint32_t multiply_high(uint32_t a, uint32_t b) {
#if defined(__CUDA_ARCH__)
  return __umulhi(a, b);
#else
  return static_cast<uint32_t>((static_cast<uint64_t>(a) * b) >> 32);
#endif
}

PATCHBAY_HD PhiloxBlock philox_round(PhiloxBlock c, PhiloxKey k) {
  const uint32_t hi0 = multiply_high(kPhiloxMultiplier0, c.word[0]);
  const uint32_t lo0 = kPhiloxMultiplier0 * c.word[0];
  const uint32_t hi1 = multiply_high(kPhiloxMultiplier1, c.word[2]);
  const uint32_t lo1 = kPhiloxMultiplier1 * c.word[2];
  return PhiloxBlock{{hi1 ^ c.word[1] ^ k.word[0], lo1, hi0 ^ c.word[3] ^ k.word[1], lo0}};
}
}  // namespace detail

// Four independent 32-bit outputs for one (counter, key).
PATCHBAY_HD PhiloxBlock philox4x32_10(PhiloxBlock counter, PhiloxKey key) {
  for (int round = 0; round < 10; ++round) {
    if (round > 0) {
      key.word[0] += detail::kPhiloxWeyl0;
      key.word[1] += detail::kPhiloxWeyl1;
    }
    counter = detail::philox_round(counter, key);
  }
  return counter;
}

// The counter of element `index` in stream `offset` (e.g. the step): words 0-1 the index,
// words 2-3 the offset; the key is the 64-bit seed.
PATCHBAY_HD PhiloxBlock philox_draw(uint64_t seed, uint64_t offset, uint64_t index) {
  const PhiloxBlock counter{{static_cast<uint32_t>(index), static_cast<uint32_t>(index >> 32),
                             static_cast<uint32_t>(offset), static_cast<uint32_t>(offset >> 32)}};
  const PhiloxKey key{{static_cast<uint32_t>(seed), static_cast<uint32_t>(seed >> 32)}};
  return philox4x32_10(counter, key);
}

// Uniform in [0, 1): the top 24 bits, so every value is an exact f32 and 1 is never reached.
PATCHBAY_HD float uniform_from_bits(uint32_t bits) {
  return static_cast<float>(bits >> 8) * (1.0f / 16777216.0f);
}

// Standard normal from two words (Box-Muller; u1 in (0, 1] so the log is finite).
PATCHBAY_HD float normal_from_bits(uint32_t bits_a, uint32_t bits_b) {
  const float u1 = (static_cast<float>(bits_a >> 8) + 1.0f) * (1.0f / 16777216.0f);
  const float u2 = uniform_from_bits(bits_b);
  return sqrtf(-2.0f * logf(u1)) * cosf(6.283185307179586f * u2);
}

// The engine's random fill layout (core/engine/ops/creation.cpp, `random`): element i of a
// fill that starts at counter block `first_block` is word i % 4 of
// philox4x32_10({first_block + i / 4, 0}, seed) (= philox_draw(seed, 0, first_block + i / 4)),
// mapped to uniform [low, high) (in double, rounded once) or, for normal, Box-Muller on the
// word pairs (0, 1) and (2, 3), cos then sin. Writes the four values of one block.
PATCHBAY_HD void engine_random_block(uint64_t seed, uint64_t block, bool normal, double low,
                                     double high, float values[4]) {
  const PhiloxBlock w = philox_draw(seed, 0, block);
  if (normal) {
    for (int pair = 0; pair < 2; ++pair) {
      const float u1 = (static_cast<float>(w.word[2 * pair] >> 8) + 1.0f) * (1.0f / 16777216.0f);
      const float u2 = uniform_from_bits(w.word[2 * pair + 1]);
      const float r = sqrtf(-2.0f * logf(u1));
      const float theta = 6.2831853071795864f * u2;
      values[2 * pair] = r * cosf(theta);
      values[2 * pair + 1] = r * sinf(theta);
    }
  } else {
    for (int j = 0; j < 4; ++j)
      values[j] = static_cast<float>(low + (high - low) *
                                               static_cast<double>(uniform_from_bits(w.word[j])));
  }
}

}  // namespace patchbay::kernels::cuda::math
