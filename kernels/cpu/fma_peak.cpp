// The arithmetic peak probe (patchbay/kernels/fma_peak.hpp).
#include "patchbay/kernels/fma_peak.hpp"

#include <omp.h>

#include <algorithm>
#include <chrono>
#include <cstring>
#include <stdexcept>

#if defined(__x86_64__) && defined(__GNUC__)
#include <immintrin.h>
#define PATCHBAY_PEAK_X86 1
#endif

namespace patchbay::kernels {
namespace {

#if PATCHBAY_PEAK_X86
// Each function below keeps its kPeakChains accumulators in registers (the unrolled inner loop
// is kPeakChains multiply-adds on registers and nothing else) and writes lane 0 of each to
// lane0[kPeakChains] at the end, so no instruction can be optimised away.

__attribute__((target("avx512f"))) void f32_chains_avx512(std::int64_t iterations, float start,
                                                          float scale, float step, float* lane0) {
  __m512 acc[kPeakChains];
  for (int c = 0; c < kPeakChains; ++c) acc[c] = _mm512_set1_ps(start + static_cast<float>(c));
  const __m512 x = _mm512_set1_ps(scale), y = _mm512_set1_ps(step);
  for (std::int64_t it = 0; it < iterations; ++it) {
#pragma GCC unroll 16
    for (int c = 0; c < kPeakChains; ++c) acc[c] = _mm512_fmadd_ps(acc[c], x, y);
  }
  for (int c = 0; c < kPeakChains; ++c) lane0[c] = _mm512_cvtss_f32(acc[c]);
}

__attribute__((target("avx2,fma"))) void f32_chains_avx2(std::int64_t iterations, float start,
                                                         float scale, float step, float* lane0) {
  __m256 acc[kPeakChains];
  for (int c = 0; c < kPeakChains; ++c) acc[c] = _mm256_set1_ps(start + static_cast<float>(c));
  const __m256 x = _mm256_set1_ps(scale), y = _mm256_set1_ps(step);
  for (std::int64_t it = 0; it < iterations; ++it) {
#pragma GCC unroll 16
    for (int c = 0; c < kPeakChains; ++c) acc[c] = _mm256_fmadd_ps(acc[c], x, y);
  }
  for (int c = 0; c < kPeakChains; ++c) lane0[c] = _mm256_cvtss_f32(acc[c]);
}

// a and b as bf16: the upper 16 bits of their f32 encodings (exact for values with 8
// significant bits, as the tests and the timed probe use).
__attribute__((target("avx512f,avx512bf16"))) void bf16_chains(std::int64_t iterations, float a,
                                                               float b, float* lane0) {
  std::uint32_t a_bits = 0, b_bits = 0;
  std::memcpy(&a_bits, &a, sizeof a);
  std::memcpy(&b_bits, &b, sizeof b);
  const __m512bh va =
      reinterpret_cast<__m512bh>(_mm512_set1_epi16(static_cast<short>(a_bits >> 16)));
  const __m512bh vb =
      reinterpret_cast<__m512bh>(_mm512_set1_epi16(static_cast<short>(b_bits >> 16)));
  __m512 acc[kPeakChains];
  for (int c = 0; c < kPeakChains; ++c) acc[c] = _mm512_setzero_ps();
  for (std::int64_t it = 0; it < iterations; ++it) {
#pragma GCC unroll 16
    for (int c = 0; c < kPeakChains; ++c) acc[c] = _mm512_dpbf16_ps(acc[c], va, vb);
  }
  for (int c = 0; c < kPeakChains; ++c) lane0[c] = _mm512_cvtss_f32(acc[c]);
}

bool has_avx512() { return __builtin_cpu_supports("avx512f"); }
bool has_avx2_fma() { return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma"); }
bool has_avx512_bf16() { return has_avx512() && __builtin_cpu_supports("avx512bf16"); }
#endif

enum class Probe { kF32Avx512, kF32Avx2, kBf16 };

// FLOPs of one loop trip: kPeakChains instructions × lanes × FLOPs per lane.
double flops_per_trip(Probe probe) {
  switch (probe) {
    case Probe::kF32Avx512:
      return kPeakChains * 16.0 * 2.0;
    case Probe::kF32Avx2:
      return kPeakChains * 8.0 * 2.0;
    case Probe::kBf16:
      return kPeakChains * 16.0 * 4.0;
  }
  return 0;
}

// One round on every OpenMP thread: GFLOP/s of all threads together over the wall time.
double time_round(Probe probe, std::int64_t iterations) {
  const auto t0 = std::chrono::steady_clock::now();
  float sink = 0;
#pragma omp parallel reduction(+ : sink)
  {
    float lane0[kPeakChains] = {};
#if PATCHBAY_PEAK_X86
    // Values that stay normal and finite for any iteration count.
    const float start = 0.001f * static_cast<float>(omp_get_thread_num());
    switch (probe) {
      case Probe::kF32Avx512:
        f32_chains_avx512(iterations, start, 0.999999f, 1e-7f, lane0);
        break;
      case Probe::kF32Avx2:
        f32_chains_avx2(iterations, start, 0.999999f, 1e-7f, lane0);
        break;
      case Probe::kBf16:
        bf16_chains(iterations, 1.0f, 0x1p-20f, lane0);
        break;
    }
#endif
    sink += lane0[0];
  }
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  volatile float keep = sink;  // the threads' results are used
  (void)keep;
  return flops_per_trip(probe) * static_cast<double>(iterations) * omp_get_max_threads() / seconds /
         1e9;
}

PeakRate measure(Probe probe, const char* isa, int rounds, std::int64_t iterations) {
  PeakRate rate;
  rate.isa = isa;
  time_round(probe, iterations);  // untimed: clocks and pages settle
  std::vector<double> samples;
  for (int r = 0; r < rounds; ++r) samples.push_back(time_round(probe, iterations));
  std::sort(samples.begin(), samples.end());
  rate.median_gflops = samples[samples.size() / 2];
  rate.best_gflops = samples.back();
  return rate;
}

}  // namespace

FmaPeak measure_fma_peak(int rounds, std::int64_t iterations) {
  if (rounds < 1 || iterations < 1)
    throw std::invalid_argument("measure_fma_peak: rounds and iterations must be >= 1, found " +
                                std::to_string(rounds) + " and " + std::to_string(iterations));
  FmaPeak peak;
  peak.threads = omp_get_max_threads();
#if PATCHBAY_PEAK_X86
  if (has_avx512())
    peak.f32 = measure(Probe::kF32Avx512, "avx512f", rounds, iterations);
  else if (has_avx2_fma())
    peak.f32 = measure(Probe::kF32Avx2, "avx2+fma", rounds, iterations);
  if (has_avx512_bf16()) peak.bf16 = measure(Probe::kBf16, "avx512bf16", rounds, iterations);
#endif
  return peak;
}

std::vector<float> fma_peak_f32_chains(bool avx512, std::int64_t iterations, float start,
                                       float scale, float step) {
#if PATCHBAY_PEAK_X86
  std::vector<float> lane0(kPeakChains);
  if (avx512 && has_avx512()) {
    f32_chains_avx512(iterations, start, scale, step, lane0.data());
    return lane0;
  }
  if (!avx512 && has_avx2_fma()) {
    f32_chains_avx2(iterations, start, scale, step, lane0.data());
    return lane0;
  }
#else
  (void)avx512, (void)iterations, (void)start, (void)scale, (void)step;
#endif
  return {};
}

std::vector<float> fma_peak_bf16_chains(std::int64_t iterations, float a, float b) {
#if PATCHBAY_PEAK_X86
  if (has_avx512_bf16()) {
    std::vector<float> lane0(kPeakChains);
    bf16_chains(iterations, a, b, lane0.data());
    return lane0;
  }
#else
  (void)iterations, (void)a, (void)b;
#endif
  return {};
}

}  // namespace patchbay::kernels
