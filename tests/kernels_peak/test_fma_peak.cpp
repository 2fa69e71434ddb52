// The peak probe does the multiply-adds it counts: after N loop trips every chain holds what N
// scalar multiply-adds give, bit for bit (so a probe that skipped or merged trips would fail).
#include <doctest.h>

#include <cmath>
#include <stdexcept>

#include "patchbay/kernels/fma_peak.hpp"

namespace pk = patchbay::kernels;

namespace {

// a = fmaf(a, scale, step) `iterations` times from start + chain.
float f32_recurrence(int chain, long iterations, float start, float scale, float step) {
  float a = start + static_cast<float>(chain);
  for (long i = 0; i < iterations; ++i) a = std::fmaf(a, scale, step);
  return a;
}

void check_f32_path(bool avx512) {
  constexpr long kIterations = 1000;
  const float start = 0.25f, scale = 0.9990234375f, step = 0.0078125f;
  const std::vector<float> lanes = pk::fma_peak_f32_chains(avx512, kIterations, start, scale, step);
  if (lanes.empty()) return;  // this CPU lacks the path
  REQUIRE(lanes.size() == static_cast<size_t>(pk::kPeakChains));
  for (int c = 0; c < pk::kPeakChains; ++c) {
    CAPTURE(c);
    CHECK(lanes[static_cast<size_t>(c)] == f32_recurrence(c, kIterations, start, scale, step));
  }
}

}  // namespace

TEST_CASE("f32 peak probe: every chain ends where the scalar FMA recurrence does") {
  SUBCASE("AVX-512") { check_f32_path(true); }
  SUBCASE("AVX2 + FMA") { check_f32_path(false); }
}

TEST_CASE("bf16 peak probe: every chain adds two bf16 products per trip") {
  // Sums stay exact in f32 (at most 15 significant bits), so no rounding order matters.
  constexpr long kIterations = 5000;
  for (const auto& [a, b] : {std::pair{1.0f, 0x1p-20f}, std::pair{3.0f, 0x1p-12f}}) {
    const std::vector<float> lanes = pk::fma_peak_bf16_chains(kIterations, a, b);
    if (lanes.empty()) return;  // no AVX512-BF16 here
    REQUIRE(lanes.size() == static_cast<size_t>(pk::kPeakChains));
    for (float lane : lanes) CHECK(lane == static_cast<float>(kIterations) * 2.0f * a * b);
  }
}

TEST_CASE("measure_fma_peak: rates for the paths the CPU has, errors for bad counts") {
  const pk::FmaPeak peak = pk::measure_fma_peak(1, 2000);
  CHECK(peak.threads >= 1);
  CHECK(peak.f32.isa.empty() == (peak.f32.median_gflops == 0));
  CHECK(peak.bf16.isa.empty() == (peak.bf16.median_gflops == 0));
  if (!peak.f32.isa.empty()) CHECK(peak.f32.best_gflops >= peak.f32.median_gflops);
  CHECK_THROWS_AS(pk::measure_fma_peak(0, 10), std::invalid_argument);
  CHECK_THROWS_AS(pk::measure_fma_peak(1, 0), std::invalid_argument);
}
