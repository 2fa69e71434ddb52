// AVX-512 row loop of the skinny matmul (see patchbay/kernels/skinny_matmul.hpp): one row of
// W at a time, eight 16-lane accumulators for one row of x, four per row for two to four
// (8 to 16 independent FMA chains); the k tail is a masked load (no padding, no
// out-of-bounds read). bf16 weights are widened exactly
// (zero-extend, shift left 16) before the f32 FMA. Built with -mavx512f -mavx512bw -mavx512vl;
// called only when the CPU has them. GCC 12's AVX-512 headers build some intrinsics
// (_mm512_cvtepu16_epi32, _mm512_slli_epi32, _mm512_reduce_add_ps) from _mm512_undefined_*(), which
// -Wuninitialized then reports wherever they are inlined: a known false positive (GCC bug 105593),
// silenced for this file.
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#include <immintrin.h>

#include "skinny_matmul_rows.hpp"

namespace patchbay::kernels::skinny_rows {
namespace {

template <bool kBf16>
inline __m512 load_w(const void* row, std::int64_t q) {
  if constexpr (kBf16) {
    const auto* p = static_cast<const std::uint16_t*>(row) + q;
    const __m256i half = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p));
    return _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(half), 16));
  } else {
    return _mm512_loadu_ps(static_cast<const float*>(row) + q);
  }
}

template <bool kBf16>
inline __m512 load_w_masked(const void* row, std::int64_t q, __mmask16 mask) {
  if constexpr (kBf16) {
    const auto* p = static_cast<const std::uint16_t*>(row) + q;
    const __m256i half = _mm256_maskz_loadu_epi16(mask, p);
    return _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(half), 16));
  } else {
    return _mm512_maskz_loadu_ps(mask, static_cast<const float*>(row) + q);
  }
}

// Software prefetch of the W lines kPrefetchBytes ahead of the kVectors · 16 elements at q
// (one line per vector of f32, one per two of bf16): the hardware prefetcher alone left the
// stream below a plain read loop's rate. Measured with 2 threads, bf16 W at GPT-2's decoding
// shapes ([50257, 768], [2304, 768], [768, 3072]): 43-48 GB/s without, 48-53 with 3-8 KiB
// ahead (the read loop: 46-51), flat between 4 and 6 KiB. Past a thread's range (or W's end)
// the hint reads the next rows or nothing: a prefetch never faults.
constexpr std::int64_t kPrefetchBytes = 4096;

template <int kVectors, bool kBf16>
inline void prefetch_ahead(const void* row, std::int64_t q) {
  constexpr int kLines = kBf16 ? kVectors / 2 : kVectors;
  const char* at = static_cast<const char*>(row) + q * (kBf16 ? 2 : 4) + kPrefetchBytes;
  for (int line = 0; line < kLines; ++line) _mm_prefetch(at + 64 * line, _MM_HINT_T0);
}

// 16-lane accumulators per row of x: 8 for one row (batch-1 decoding), 4 for two to four (8
// to 16 chains in all, and at most 16 of the 32 vector registers). With 4 chains for one row
// the stream ran at 80-87% of a plain read loop's rate; with 8, at 97-102% (GPT-2's 49 f32
// decoding products chained, 2 threads, 58-65 GB/s, 30-40 alternating rounds; a throwaway
// driver): a W line that arrives late stalls its chain, and 4 chains left too little
// independent work to keep the next lines' loads in flight.
template <int kM>
constexpr int kAccumulators = kM == 1 ? 8 : 4;

// Row j of W against the kM rows of x: kU 16-lane accumulators per row of x over k in steps
// of 16 · kU, then single vectors, then a masked tail. One row at a time keeps one sequential
// stream per thread, which the hardware prefetcher follows best: measured at n = 3072,
// k = 768 (1 thread, CPU time), 20 GB/s, equal to a plain read loop, against 14.7 GB/s for
// four rows at a time (four interleaved streams).
template <int kM, bool kBf16>
inline void row(const SkinnyMatmulParams& p, std::int64_t j) {
  constexpr int kU = kAccumulators<kM>;
  constexpr std::int64_t kStep = 16 * kU;
  const std::int64_t k = p.k;
  const void* w = static_cast<const char*>(p.w) +
                  static_cast<std::size_t>(j * p.w_row_stride) * (kBf16 ? 2 : 4);
  const float* xs[kM];
  for (int i = 0; i < kM; ++i) xs[i] = p.x + i * p.x_row_stride;
  __m512 acc[kM][kU];
  for (int i = 0; i < kM; ++i)
    for (int u = 0; u < kU; ++u) acc[i][u] = _mm512_setzero_ps();
  std::int64_t q = 0;
  for (; q + kStep <= k; q += kStep) {
    prefetch_ahead<kU, kBf16>(w, q);
    __m512 wv[kU];
    for (int u = 0; u < kU; ++u) wv[u] = load_w<kBf16>(w, q + 16 * u);
    for (int i = 0; i < kM; ++i)
      for (int u = 0; u < kU; ++u)
        acc[i][u] = _mm512_fmadd_ps(_mm512_loadu_ps(xs[i] + q + 16 * u), wv[u], acc[i][u]);
  }
  for (; q + 16 <= k; q += 16) {
    const __m512 wv = load_w<kBf16>(w, q);
    for (int i = 0; i < kM; ++i)
      acc[i][0] = _mm512_fmadd_ps(_mm512_loadu_ps(xs[i] + q), wv, acc[i][0]);
  }
  if (q < k) {
    const __mmask16 mask = static_cast<__mmask16>((1u << (k - q)) - 1u);
    const __m512 wv = load_w_masked<kBf16>(w, q, mask);
    for (int i = 0; i < kM; ++i)
      acc[i][1] = _mm512_fmadd_ps(_mm512_maskz_loadu_ps(mask, xs[i] + q), wv, acc[i][1]);
  }
  for (int i = 0; i < kM; ++i) {
    // Pairwise: (0+1) + (2+3), ... in a fixed order, so the result depends on k only.
    __m512 level[kU];
    for (int u = 0; u < kU; ++u) level[u] = acc[i][u];
    for (int width = kU / 2; width >= 1; width /= 2)
      for (int u = 0; u < width; ++u) level[u] = _mm512_add_ps(level[2 * u], level[2 * u + 1]);
    p.y[i * p.y_row_stride + j] = _mm512_reduce_add_ps(level[0]);
  }
}

template <int kM, bool kBf16>
void rows(const SkinnyMatmulParams& p, std::int64_t j_begin, std::int64_t j_end) {
  for (std::int64_t j = j_begin; j < j_end; ++j) row<kM, kBf16>(p, j);
}

template <bool kBf16>
void rows_for_m(const SkinnyMatmulParams& p, std::int64_t j_begin, std::int64_t j_end) {
  switch (p.m) {
    case 1:
      rows<1, kBf16>(p, j_begin, j_end);
      break;
    case 2:
      rows<2, kBf16>(p, j_begin, j_end);
      break;
    case 3:
      rows<3, kBf16>(p, j_begin, j_end);
      break;
    default:
      rows<4, kBf16>(p, j_begin, j_end);
      break;
  }
}

}  // namespace

void rows_avx512(const SkinnyMatmulParams& p, std::int64_t j_begin, std::int64_t j_end) {
  if (p.w_type == SkinnyWeightType::kBF16) {
    rows_for_m<true>(p, j_begin, j_end);
  } else {
    rows_for_m<false>(p, j_begin, j_end);
  }
}

}  // namespace patchbay::kernels::skinny_rows

#pragma GCC diagnostic pop
