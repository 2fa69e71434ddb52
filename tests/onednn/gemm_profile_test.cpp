// The per-shape GEMM profile (bench train --gemm-breakdown): off by default, one row per call
// shape with its calls and FLOPs (a sliced call counts once), the dtype filter and the table's
// total. Times are only checked to be positive: benchmarks are commands, not tests.
#include <doctest/doctest.h>

#include <string>
#include <vector>

#include "onednn/gemm_profile.hpp"
#include "onednn/onednn_ops.hpp"

namespace patchbay::onednn {
namespace {

void product(std::int64_t m, std::int64_t k, std::int64_t n, bool transpose_b) {
  std::vector<float> a(static_cast<size_t>(m * k), 1.0f), b(static_cast<size_t>(k * n), 1.0f),
      c(static_cast<size_t>(m * n), 0.0f);
  matmul_2d_f32(a.data(), b.data(), c.data(), m, n, k, false, transpose_b);
  CHECK(c[0] == static_cast<float>(k));
}

const GemmShapeStat* find(const std::vector<GemmShapeStat>& stats, const std::string& shape) {
  for (const GemmShapeStat& s : stats)
    if (s.shape == shape) return &s;
  return nullptr;
}

TEST_CASE("the GEMM profile records each call's shape, count and FLOPs while on") {
  (void)take_gemm_profile();
  CHECK_FALSE(gemm_profiling());
  product(8, 16, 32, false);  // off: not recorded
  CHECK(take_gemm_profile().empty());

  set_gemm_profiling(true);
  product(8, 16, 32, false);
  product(8, 16, 32, false);
  product(4, 16, 24, true);
  product(2, 40000, 3, false);  // sliced in depth inside matmul: still one call
  set_gemm_profiling(false);
  product(8, 16, 32, false);  // off again

  const std::vector<GemmShapeStat> stats = take_gemm_profile();
  REQUIRE(stats.size() == 3);
  const GemmShapeStat* plain = find(stats, "f32 [8 x 16] x [16 x 32]");
  const GemmShapeStat* transposed = find(stats, "f32 [4 x 16] x [16 x 24]^T");
  const GemmShapeStat* deep = find(stats, "f32 [2 x 40000] x [40000 x 3]");
  REQUIRE(plain != nullptr);
  REQUIRE(transposed != nullptr);
  REQUIRE(deep != nullptr);
  CHECK(plain->calls == 2);
  CHECK(plain->flops == doctest::Approx(2 * 2.0 * 8 * 16 * 32));
  CHECK(transposed->calls == 1);
  CHECK(deep->calls == 1);
  CHECK(deep->flops == doctest::Approx(2.0 * 2 * 40000 * 3));
  for (const GemmShapeStat& s : stats) CHECK(s.seconds > 0.0);
  for (size_t i = 1; i < stats.size(); ++i) CHECK(stats[i - 1].seconds >= stats[i].seconds);
  CHECK(take_gemm_profile().empty());  // taking clears
}

TEST_CASE("the GEMM profile table filters by dtype, folds extra rows and totals") {
  const std::vector<GemmShapeStat> stats = {
      {"bf16 [4 x 4] x [4 x 4]", 2, 0.004, 4e9},  // 1 TFLOP/s
      {"f32 [8 x 8] x [8 x 8]^T", 4, 0.002, 1e9},  // 500 GFLOP/s
      {"f32 [2 x 2] x [2 x 2]", 2, 0.001, 0.25e9},
      {"f32 [1 x 1] x [1 x 1]", 2, 0.001, 0.25e9}};
  const std::string f32 = format_gemm_profile(stats, "f32", 2, 0.004, 500.0, 2);
  INFO(f32);
  CHECK(f32.find("f32 [8 x 8] x [8 x 8]^T") != std::string::npos);
  CHECK(f32.find("bf16") == std::string::npos);
  CHECK(f32.find("(1 more shape)") != std::string::npos);
  CHECK(f32.find("all f32 GEMMs") != std::string::npos);
  CHECK(f32.find("100%") != std::string::npos);  // the first row at the reference rate
  // 4 ms of GEMMs over 2 steps of 4 ms: half of each step.
  CHECK(f32.find("GEMMs: 50.0% of the step's time") != std::string::npos);
  CHECK(format_gemm_profile(stats, "f16", 1, 1.0, 1.0).find("no f16 GEMMs") != std::string::npos);
  const GemmShapeStat total = gemm_profile_total(stats, "f32");
  CHECK(total.calls == 8);
  CHECK(total.seconds == doctest::Approx(0.004));
  CHECK(total.flops == doctest::Approx(1.5e9));
  CHECK(gemm_profile_total(stats, "bf16").calls == 2);
  CHECK(gemm_profile_total(stats, "f16").calls == 0);
}

}  // namespace
}  // namespace patchbay::onednn
