// AVX-512 row loop of the skinny matmul (see patchbay/kernels/skinny_matmul.hpp): one row of
// W at a time against one or two rows of x, eight 16-lane accumulators per row of x; the k
// tail is a masked load (no padding, no out-of-bounds read). bf16 weights are widened exactly
// (zero-extend, shift left 16) before the f32 FMA.
// Batch invariance: every y[i][j] is summed in one order that depends on k alone (lane l of
// accumulator u takes q = 128 s + 16 u + l in increasing s; the tail into accumulator 1; then
// the pairwise reduction below), whatever m, the tile or the thread; one row or two only
// choose which chains run side by side. For m > 2, W's rows go in chunks of 16 that meet every
// pair of x rows (the chunk stays in L2).
// Built with -mavx512f -mavx512bw -mavx512vl;
// called only when the CPU has them. GCC 12's AVX-512 headers build some intrinsics
// (_mm512_cvtepu16_epi32, _mm512_slli_epi32, _mm512_reduce_add_ps) from _mm512_undefined_*(), which
// -Wuninitialized then reports wherever they are inlined: a known false positive (GCC bug 105593),
// silenced for this file.
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#include <immintrin.h>

#include <algorithm>

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

// Eight 16-lane accumulators per row of x, for every m (the order above). With 4 chains for
// one row the stream ran at 80-87% of a plain read loop's rate; with 8, at 97-102% (GPT-2's 49
// f32 decoding products chained, 2 threads, 58-65 GB/s, 30-40 alternating rounds; a throwaway
// driver): a W line that arrives late stalls its chain, and 4 chains left too little
// independent work to keep the next lines' loads in flight. Two rows of x: 16 accumulators and
// 8 W vectors of the 32 registers.
constexpr int kU = 8;
constexpr std::int64_t kChunkRows = 16;

// Row j of W against rows [i0, i0 + kM) of x: kU 16-lane accumulators per row of x over k in
// steps of 16 · kU, then single vectors, then a masked tail. One row at a time keeps one
// sequential stream per thread, which the hardware prefetcher follows best: measured at
// n = 3072, k = 768 (1 thread, CPU time), 20 GB/s, equal to a plain read loop, against 14.7
// GB/s for four rows at a time (four interleaved streams).
template <int kM, bool kBf16>
inline void row(const SkinnyMatmulParams& p, std::int64_t i0, std::int64_t j) {
  constexpr std::int64_t kStep = 16 * kU;
  const std::int64_t k = p.k;
  const void* w = static_cast<const char*>(p.w) +
                  static_cast<std::size_t>(j * p.w_row_stride) * (kBf16 ? 2 : 4);
  const float* xs[kM];
  for (int i = 0; i < kM; ++i) xs[i] = p.x + (i0 + i) * p.x_row_stride;
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
    p.y[(i0 + i) * p.y_row_stride + j] = _mm512_reduce_add_ps(level[0]);
  }
}

template <bool kBf16>
void rows(const SkinnyMatmulParams& p, std::int64_t j_begin, std::int64_t j_end) {
  if (p.m == 1) {
    for (std::int64_t j = j_begin; j < j_end; ++j) row<1, kBf16>(p, 0, j);
    return;
  }
  for (std::int64_t jb = j_begin; jb < j_end; jb += kChunkRows) {
    const std::int64_t je = std::min(j_end, jb + kChunkRows);
    std::int64_t i = 0;
    for (; i + 2 <= p.m; i += 2)
      for (std::int64_t j = jb; j < je; ++j) row<2, kBf16>(p, i, j);
    if (i < p.m)
      for (std::int64_t j = jb; j < je; ++j) row<1, kBf16>(p, i, j);
  }
}

}  // namespace

void rows_avx512(const SkinnyMatmulParams& p, std::int64_t j_begin, std::int64_t j_end) {
  if (p.w_type == SkinnyWeightType::kBF16) {
    rows<true>(p, j_begin, j_end);
  } else {
    rows<false>(p, j_begin, j_end);
  }
}

}  // namespace patchbay::kernels::skinny_rows

#pragma GCC diagnostic pop
