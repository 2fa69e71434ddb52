// The skinny matmul kernel (kernels/cpu, y = x W^T, any number of rows of x) against its plain
// double reference: row counts 1-6 and 37, k around the vector widths (tails), f32 and bf16
// weights, every ISA path the CPU has, 1 and 3 threads, strided rows whose gaps hold NaN
// (never read), results independent of the thread count and of the other rows (batch
// invariance, bit for bit), and the validation messages.
#include "patchbay/kernels/skinny_matmul.hpp"

#include <doctest/doctest.h>
#include <omp.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <random>
#include <thread>
#include <tuple>
#include <utility>
#include <vector>

namespace pk = patchbay::kernels;

namespace {

std::uint16_t to_bf16(float value) {  // truncation: any bf16 pattern will do as test data
  std::uint32_t bits;
  std::memcpy(&bits, &value, sizeof bits);
  return static_cast<std::uint16_t>(bits >> 16);
}

float from_bf16(std::uint16_t half) {
  const std::uint32_t bits = static_cast<std::uint32_t>(half) << 16;
  float value;
  std::memcpy(&value, &bits, sizeof value);
  return value;
}

struct Problem {
  std::int64_t m, n, k, gap;  // gap: extra elements after every row (NaN)
  bool bf16;
  std::vector<float> x, w32, y;
  std::vector<std::uint16_t> w16;

  Problem(std::int64_t m_, std::int64_t n_, std::int64_t k_, std::int64_t gap_, bool bf16_,
          unsigned seed)
      : m(m_), n(n_), k(k_), gap(gap_), bf16(bf16_) {
    const float nan = std::numeric_limits<float>::quiet_NaN();
    std::mt19937 rng(seed);
    std::normal_distribution<float> normal(0.0f, 1.0f);
    x.assign(static_cast<size_t>(m * (k + gap)), nan);
    w32.assign(static_cast<size_t>(n * (k + gap)), nan);
    w16.assign(static_cast<size_t>(n * (k + gap)), to_bf16(nan));
    y.assign(static_cast<size_t>(m * (n + gap)), nan);
    for (std::int64_t i = 0; i < m; ++i)
      for (std::int64_t q = 0; q < k; ++q) x[static_cast<size_t>(i * (k + gap) + q)] = normal(rng);
    for (std::int64_t j = 0; j < n; ++j)
      for (std::int64_t q = 0; q < k; ++q) {
        const size_t at = static_cast<size_t>(j * (k + gap) + q);
        w32[at] = normal(rng);
        w16[at] = to_bf16(w32[at]);
      }
  }

  pk::SkinnyMatmulParams params(std::vector<float>& out) const {
    pk::SkinnyMatmulParams p;
    p.x = x.data();
    p.x_row_stride = k + gap;
    p.w = bf16 ? static_cast<const void*>(w16.data()) : static_cast<const void*>(w32.data());
    p.w_type = bf16 ? pk::SkinnyWeightType::kBF16 : pk::SkinnyWeightType::kF32;
    p.w_row_stride = k + gap;
    out = y;
    p.y = out.data();
    p.y_row_stride = n + gap;
    p.m = m;
    p.n = n;
    p.k = k;
    return p;
  }

  float weight(std::int64_t j, std::int64_t q) const {
    const size_t at = static_cast<size_t>(j * (k + gap) + q);
    return bf16 ? from_bf16(w16[at]) : w32[at];
  }

  // f32 accumulation of k products errs by at most about k * 2^-24 * sum |x w| (a
  // blocked/tree sum does better); 4x that leaves room and still catches any wrong term,
  // which moves the result by ~|x w| ~ 1.
  double tolerance(std::int64_t i, std::int64_t j) const {
    double magnitude = 0;
    for (std::int64_t q = 0; q < k; ++q)
      magnitude +=
          std::abs(static_cast<double>(x[static_cast<size_t>(i * (k + gap) + q)]) * weight(j, q));
    return 4.0 * static_cast<double>(k) * std::ldexp(1.0, -24) * magnitude + 1e-30;
  }
};

void check_against_reference(const Problem& problem, pk::SkinnyIsa isa, int threads) {
  std::vector<float> got, want;
  pk::SkinnyMatmulParams p = problem.params(got);
  p.isa = isa;
  p.threads = threads;
  REQUIRE(pk::skinny_matmul(p).empty());
  pk::SkinnyMatmulParams r = problem.params(want);
  REQUIRE(pk::skinny_matmul_reference(r).empty());
  const std::int64_t pitch = problem.n + problem.gap;
  for (std::int64_t i = 0; i < problem.m; ++i) {
    for (std::int64_t j = 0; j < problem.n; ++j) {
      const size_t at = static_cast<size_t>(i * pitch + j);
      REQUIRE_MESSAGE(std::abs(static_cast<double>(got[at]) - want[at]) <= problem.tolerance(i, j),
                      "m " << problem.m << " n " << problem.n << " k " << problem.k << " bf16 "
                           << problem.bf16 << " at (" << i << ", " << j << "): " << got[at]
                           << " vs " << want[at]);
    }
    for (std::int64_t j = problem.n; j < pitch; ++j)  // gaps of y untouched
      CHECK(std::isnan(got[static_cast<size_t>(i * pitch + j)]));
  }
}

std::vector<pk::SkinnyIsa> isas() {
  std::vector<pk::SkinnyIsa> paths = {pk::SkinnyIsa::kGeneric};
  if (pk::skinny_matmul_has_avx2()) {
    paths.push_back(pk::SkinnyIsa::kAvx2);
  } else {
    MESSAGE("this CPU has no AVX2 + FMA: its path is not tested");
  }
  if (pk::skinny_matmul_has_avx512()) {
    paths.push_back(pk::SkinnyIsa::kAvx512);
  } else {
    MESSAGE("this CPU has no AVX-512: its path is not tested");
  }
  return paths;
}

}  // namespace

TEST_CASE("skinny matmul equals its double reference: rows, tails, dtypes, ISAs, threads") {
  unsigned seed = 1;
  for (pk::SkinnyIsa isa : isas()) {
    for (bool bf16 : {false, true}) {
      for (std::int64_t m : {1, 2, 3, 4, 5, 6, 37}) {
        // Around the vectors (8, 16), the AVX2 step (16) and the AVX-512 8-accumulator step
        // (128), with single vectors and a masked tail after full steps; n around the AVX2
        // tiles (3) and the 16-row chunks.
        for (std::int64_t k : {1, 15, 16, 17, 63, 64, 65, 127, 128, 129, 130, 145, 257}) {
          for (std::int64_t n : {1, 7, 33}) {
            check_against_reference(Problem(m, n, k, 0, bf16, seed++), isa, 1);
          }
        }
        // Strided rows with NaN in the gaps, and a W big enough to run threaded (> 256 KiB).
        check_against_reference(Problem(m, 9, 70, 5, bf16, seed++), isa, 1);
        check_against_reference(Problem(m, 1100, 77, 3, bf16, seed++), isa, 3);
      }
    }
  }
}

TEST_CASE("skinny matmul results do not depend on the thread count") {
  for (auto [m, bf16] :
       {std::pair{1, false}, std::pair{1, true}, std::pair{2, false}, std::pair{2, true}}) {
    const Problem problem(m, 2053, 160, 0, bf16, 99);  // 2053 x 160 f32 = 1.3 MB: threaded
    std::vector<float> one, three;
    pk::SkinnyMatmulParams a = problem.params(one);
    a.threads = 1;
    pk::SkinnyMatmulParams b = problem.params(three);
    b.threads = 3;
    REQUIRE(pk::skinny_matmul(a).empty());
    REQUIRE(pk::skinny_matmul(b).empty());
    CHECK(std::memcmp(one.data(), three.data(), one.size() * sizeof(float)) == 0);
  }
}

// Batch invariance: row i of x gives the same bits whatever rows share the call (alone, among
// 2-5, among 37, first or later), on every path, at 1 and 2 threads; k with and without tails.
TEST_CASE("skinny matmul rows do not depend on the other rows (bit for bit)") {
  for (pk::SkinnyIsa isa : isas()) {
    for (bool bf16 : {false, true}) {
      for (std::int64_t k : {7, 64, 200, 768}) {
        CAPTURE(static_cast<int>(isa));
        CAPTURE(bf16);
        CAPTURE(k);
        const Problem all(37, 301, k, 0, bf16, 7u + static_cast<unsigned>(k));
        std::vector<float> whole;
        pk::SkinnyMatmulParams p = all.params(whole);
        p.isa = isa;
        REQUIRE(pk::skinny_matmul(p).empty());
        for (std::int64_t first : {0, 1, 5, 36}) {
          for (std::int64_t rows : {1, 2, 3, 4, 5}) {
            if (first + rows > all.m) continue;
            for (int threads : {1, 2}) {
              std::vector<float> part(static_cast<size_t>(rows * all.n));
              pk::SkinnyMatmulParams q = p;
              q.x = all.x.data() + first * all.k;
              q.m = rows;
              q.y = part.data();
              q.threads = threads;
              REQUIRE(pk::skinny_matmul(q).empty());
              CHECK(std::memcmp(part.data(), whole.data() + first * all.n,
                                part.size() * sizeof(float)) == 0);
            }
          }
        }
      }
    }
  }
}

TEST_CASE("skinny matmul widens bf16 weights exactly") {
  // x = e_q picks column q of W: the result must be the bf16 value itself, bit for bit.
  Problem problem(1, 20, 37, 0, true, 5);
  for (std::int64_t q : {0, 16, 36}) {
    std::fill(problem.x.begin(), problem.x.end(), 0.0f);
    problem.x[static_cast<size_t>(q)] = 1.0f;
    std::vector<float> got;
    REQUIRE(pk::skinny_matmul(problem.params(got)).empty());
    for (std::int64_t j = 0; j < problem.n; ++j)
      CHECK(got[static_cast<size_t>(j)] == problem.weight(j, q));
  }
}

TEST_CASE("skinny matmul refuses bad parameters and writes nothing") {
  Problem problem(1, 4, 8, 0, false, 3);
  std::vector<float> out;
  pk::SkinnyMatmulParams p = problem.params(out);
  p.m = 0;
  CHECK(pk::skinny_matmul(p).find("m must be >= 1, found 0") != std::string::npos);
  p = problem.params(out);
  p.k = 0;
  CHECK(pk::skinny_matmul(p).find("n and k must be >= 1") != std::string::npos);
  p = problem.params(out);
  p.w_row_stride = 7;
  CHECK(pk::skinny_matmul(p).find("row strides must cover a row") != std::string::npos);
  p = problem.params(out);
  p.w = nullptr;
  CHECK(pk::skinny_matmul_reference(p).find("null") != std::string::npos);
  for (float v : out) CHECK(std::isnan(v));
}

TEST_CASE("skinny matmul profile: the calling thread's calls while on, reset by each take") {
  const Problem f32(1, 300, 64, 0, false, 5), bf16(2, 40, 33, 0, true, 6);
  std::vector<float> y1, y2;
  (void)pk::take_skinny_profile();
  REQUIRE(pk::skinny_matmul(f32.params(y1)).empty());  // profiling off: not counted
  CHECK(pk::take_skinny_profile().calls == 0);
  pk::set_skinny_profiling(true);
  REQUIRE(pk::skinny_matmul(f32.params(y1)).empty());
  REQUIRE(pk::skinny_matmul(bf16.params(y2)).empty());
  pk::SkinnyMatmulParams invalid = f32.params(y1);
  invalid.m = 0;
  CHECK_FALSE(pk::skinny_matmul(invalid).empty());  // refused: counts nothing
  std::thread other([&] {
    std::vector<float> y;
    REQUIRE(pk::skinny_matmul(f32.params(y)).empty());  // another thread: not counted here
  });
  other.join();
  const pk::SkinnyProfile taken = pk::take_skinny_profile();
  CHECK(taken.calls == 2);
  CHECK(taken.weight_bytes == 300 * 64 * 4 + 40 * 33 * 2);
  CHECK(taken.seconds > 0);
  CHECK(pk::take_skinny_profile().calls == 0);  // the take reset it
  pk::set_skinny_profiling(false);
}

TEST_CASE("skinny matmul epilogue: bias, bias + ReLU, bias + GELU against the double reference") {
  unsigned seed = 300;
  for (pk::SkinnyIsa isa : isas()) {
    for (pk::SkinnyActivation act : {pk::SkinnyActivation::kNone, pk::SkinnyActivation::kRelu,
                                     pk::SkinnyActivation::kGeluTanh}) {
      for (bool bf16 : {false, true}) {
        for (std::int64_t m : {1, 3}) {
          // 1100 rows x 300: threaded (> 256 KiB of f32 weights), with the chunked tail.
          for (auto [n, k, threads] : {std::tuple{37, 129, 1}, std::tuple{1100, 300, 2}}) {
            const Problem problem(m, n, k, 2, bf16, seed++);
            std::mt19937 rng(seed++);
            std::normal_distribution<float> normal(0.0f, 1.0f);
            std::vector<float> bias(static_cast<size_t>(n));
            for (float& b : bias) b = normal(rng);
            std::vector<float> got, want;
            pk::SkinnyMatmulParams p = problem.params(got);
            p.isa = isa;
            p.threads = threads;
            p.bias = bias.data();
            p.activation = act;
            REQUIRE(pk::skinny_matmul(p).empty());
            pk::SkinnyMatmulParams r = problem.params(want);
            r.bias = bias.data();
            r.activation = act;
            REQUIRE(pk::skinny_matmul_reference(r).empty());
            const std::int64_t pitch = n + 2;
            for (std::int64_t i = 0; i < m; ++i) {
              for (std::int64_t j = 0; j < n; ++j) {
                const size_t at = static_cast<size_t>(i * pitch + j);
                // The sum's error passes through the activation (slope <= 1.13 for GELU),
                // plus the vectorised GELU's own (|relative| < 3e-7).
                const double tolerance =
                    1.2 * problem.tolerance(i, j) + 1e-6 * std::abs(static_cast<double>(want[at]));
                REQUIRE_MESSAGE(std::abs(static_cast<double>(got[at]) - want[at]) <= tolerance,
                                "act " << static_cast<int>(act) << " m " << m << " n " << n
                                       << " bf16 " << bf16 << " at (" << i << ", " << j
                                       << "): " << got[at] << " vs " << want[at]);
              }
              CHECK(std::isnan(got[static_cast<size_t>(i * pitch + n)]));  // gap untouched
            }
          }
        }
      }
    }
  }
}

TEST_CASE("skinny matmul refuses an activation without a bias") {
  const Problem problem(1, 4, 8, 0, false, 7);
  std::vector<float> y;
  pk::SkinnyMatmulParams p = problem.params(y);
  p.activation = pk::SkinnyActivation::kGeluTanh;
  CHECK(pk::skinny_matmul(p).find("an activation needs a bias") != std::string::npos);
}

TEST_CASE("skinny matmul: a team smaller than asked for steals the missing threads' ranges") {
  // Inside a parallel region with nesting off, the kernel's own region gets a team of one:
  // that thread walks its range, then must claim every other range's chunks (the stealing
  // that otherwise only balances the tail). Same bits as a plain one-thread run.
  const Problem problem(1, 2053, 160, 0, false, 42);  // 2053 x 160 f32 = 1.3 MB: threaded
  std::vector<float> alone, nested;
  pk::SkinnyMatmulParams a = problem.params(alone);
  a.threads = 1;
  REQUIRE(pk::skinny_matmul(a).empty());
  const int levels = omp_get_max_active_levels();
  omp_set_max_active_levels(1);
  bool ok = false;
#pragma omp parallel num_threads(2)
  {
#pragma omp single
    {
      pk::SkinnyMatmulParams b = problem.params(nested);
      b.threads = 4;  // four ranges, one thread to run them
      ok = pk::skinny_matmul(b).empty();
    }
  }
  omp_set_max_active_levels(levels);
  REQUIRE(ok);
  CHECK(std::memcmp(alone.data(), nested.data(), alone.size() * sizeof(float)) == 0);
}
