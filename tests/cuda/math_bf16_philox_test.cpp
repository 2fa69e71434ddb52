// CPU tests of the device-independent math of kernels/cuda (compiled by the host compiler, so
// they run in CI with or without nvcc): bf16 rounding against a distance-based reference and
// at ties; Philox4x32-10 against Random123's known-answer vectors (kat_vectors) and the
// moments of its uniform and normal helpers.
#include <doctest.h>

#include <cmath>
#include <cstdint>
#include <random>

#include "patchbay/kernels/cuda/math/bf16.hpp"
#include "patchbay/kernels/cuda/math/philox.hpp"

namespace math = patchbay::kernels::cuda::math;

namespace {

// The bf16 pattern nearest to f (ties to the even pattern), by comparing distances in double.
uint16_t nearest_bf16_by_distance(float f) {
  const uint32_t bits = math::float_bits(f);
  const uint16_t low = static_cast<uint16_t>(bits >> 16);  // truncation, toward zero
  const uint16_t high = static_cast<uint16_t>(low + 1);    // next magnitude away from zero
  const double value = f;
  const double low_distance = std::fabs(value - double(math::float_from_bf16(low)));
  const double high_distance = std::fabs(value - double(math::float_from_bf16(high)));
  if (low_distance < high_distance) return low;
  if (high_distance < low_distance) return high;
  return (low & 1u) == 0 ? low : high;
}

}  // namespace

TEST_CASE("bf16 rounding: ties go to the even pattern, both signs") {
  CHECK(math::bf16_from_float(math::float_from_bits(0x3F808000u)) == 0x3F80);  // 1 + 2^-8: down
  CHECK(math::bf16_from_float(math::float_from_bits(0x3F818000u)) == 0x3F82);  // odd: up
  CHECK(math::bf16_from_float(math::float_from_bits(0x3F808001u)) == 0x3F81);  // past the tie
  CHECK(math::bf16_from_float(math::float_from_bits(0x3F807FFFu)) == 0x3F80);  // before it
  CHECK(math::bf16_from_float(math::float_from_bits(0xBF818000u)) == 0xBF82);  // negative tie
  CHECK(math::bf16_from_float(1.0f) == 0x3F80);
  CHECK(math::float_from_bf16(0x3F80) == 1.0f);
}

TEST_CASE("bf16 rounding: overflow to infinity, NaN stays NaN, zeros and subnormals") {
  CHECK(math::bf16_from_float(math::float_from_bits(0x7F7FFFFFu)) == 0x7F80);  // FLT_MAX -> inf
  CHECK(math::bf16_from_float(INFINITY) == 0x7F80);
  CHECK(math::bf16_from_float(-INFINITY) == 0xFF80);
  const uint16_t nan = math::bf16_from_float(math::float_from_bits(0x7F800001u));  // signalling
  CHECK(std::isnan(math::float_from_bf16(nan)));
  CHECK((nan & 0x0040u) != 0);  // quietened
  CHECK(
      std::isnan(math::float_from_bf16(math::bf16_from_float(math::float_from_bits(0xFFFFFFFFu)))));
  CHECK(math::bf16_from_float(-0.0f) == 0x8000);
  CHECK(math::bf16_from_float(math::float_from_bits(0x00018000u)) == 0x0002);  // subnormal tie
}

TEST_CASE("bf16 rounding agrees with the nearest-by-distance reference on random finite floats") {
  std::mt19937 generator(1234);
  int checked = 0;
  for (int i = 0; i < 200000; ++i) {
    const uint32_t bits = generator();
    const float f = math::float_from_bits(bits);
    if (!std::isfinite(f) || (bits & 0x7FFFFFFFu) >= 0x7F7F8000u) continue;  // near overflow
    REQUIRE(math::bf16_from_float(f) == nearest_bf16_by_distance(f));
    ++checked;
  }
  CHECK(checked > 190000);
  CHECK(math::round_through_bf16(3.0f) == 3.0f);
}

TEST_CASE("Philox4x32-10 matches Random123's known-answer vectors") {
  struct Vector {
    math::PhiloxBlock counter;
    math::PhiloxKey key;
    math::PhiloxBlock expected;
  };
  const Vector vectors[] = {
      {{{0, 0, 0, 0}}, {{0, 0}}, {{0x6627e8d5u, 0xe169c58du, 0xbc57ac4cu, 0x9b00dbd8u}}},
      {{{0xffffffffu, 0xffffffffu, 0xffffffffu, 0xffffffffu}},
       {{0xffffffffu, 0xffffffffu}},
       {{0x408f276du, 0x41c83b0eu, 0xa20bc7c6u, 0x6d5451fdu}}},
      {{{0x243f6a88u, 0x85a308d3u, 0x13198a2eu, 0x03707344u}},
       {{0xa4093822u, 0x299f31d0u}},
       {{0xd16cfe09u, 0x94fdccebu, 0x5001e420u, 0x24126ea1u}}},
  };
  for (const Vector& v : vectors) {
    const math::PhiloxBlock out = math::philox4x32_10(v.counter, v.key);
    for (int w = 0; w < 4; ++w) CHECK(out.word[w] == v.expected.word[w]);
  }
}

TEST_CASE("Philox draws: uniform in [0, 1) with mean 1/2, normal with mean 0 and variance 1") {
  const int draws = 100000;
  double uniform_sum = 0, normal_sum = 0, normal_sq = 0;
  float uniform_min = 1, uniform_max = 0;
  for (int i = 0; i < draws; ++i) {
    const math::PhiloxBlock block = math::philox_draw(42, 7, static_cast<uint64_t>(i));
    const float u = math::uniform_from_bits(block.word[0]);
    uniform_min = std::min(uniform_min, u);
    uniform_max = std::max(uniform_max, u);
    uniform_sum += u;
    const float z = math::normal_from_bits(block.word[1], block.word[2]);
    REQUIRE(std::isfinite(z));
    normal_sum += z;
    normal_sq += double(z) * z;
  }
  CHECK(uniform_min >= 0.0f);
  CHECK(uniform_max < 1.0f);
  CHECK(uniform_sum / draws == doctest::Approx(0.5).epsilon(0.01));
  CHECK(std::fabs(normal_sum / draws) < 0.01);
  CHECK(normal_sq / draws == doctest::Approx(1.0).epsilon(0.02));
  // Different offsets give different streams for the same index.
  CHECK(math::philox_draw(42, 7, 0).word[0] != math::philox_draw(42, 8, 0).word[0]);
  CHECK(math::uniform_from_bits(0xFFFFFFFFu) < 1.0f);
}
