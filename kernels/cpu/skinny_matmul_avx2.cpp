// AVX2 + FMA row loop of the skinny matmul (see patchbay/kernels/skinny_matmul.hpp), for CPUs
// without AVX-512. Built with -mavx2 -mfma; called only when the CPU has both.
//
// Batch invariance: every y[i][j] is summed in one fixed order that depends on k alone, never
// on m, on which rows share the call, on the tile that computes it or on the thread: one
// 8-lane accumulator, lane l taking the products at q = 8 s + l in increasing s (one FMA chain
// per lane), the k tail (k mod 8 products) as a zero-padded vector, then
// ((l0 + l1) + (l2 + l3)) + ((l4 + l5) + (l6 + l7)) (reduce4 below). Tiles of 1-3 rows of x by 1-4
// rows of W only choose which chains run side by side.
//
// Blocking: x's rows in blocks of 96; for each, W's rows [j_begin, j_end) go in chunks of 8
// (24 KiB at k = 768, kept in L1/L2); each chunk meets the block's rows of x, three at a time, in
// tiles of 3 x 4 (12 accumulators, 3 x vectors and one W vector: the 16 ymm registers; 7 loads per
// 12 FMAs). One row of x (batch-1 decoding) runs tiles of 1 x 4: four chains, four streams of W.
#include <immintrin.h>

#include <algorithm>
#include <cstring>

#include "skinny_matmul_rows.hpp"

namespace patchbay::kernels::skinny_rows {
namespace {

constexpr std::int64_t kChunkRows = 8;
// Rows of x per pass over the caller's W rows (at most 128, 384 KiB at k = 768): 96 rows
// (288 KiB) stay in L2 while the chunks of W go by, instead of every chunk streaming all of x.
constexpr std::int64_t kBlockRowsOfX = 96;

template <bool kBf16>
inline __m256 load_w(const void* row, std::int64_t q) {
  if constexpr (kBf16) {
    const auto* p = static_cast<const std::uint16_t*>(row) + q;
    const __m128i half = _mm_loadu_si128(reinterpret_cast<const __m128i*>(p));
    return _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_cvtepu16_epi32(half), 16));
  } else {
    return _mm256_loadu_ps(static_cast<const float*>(row) + q);
  }
}

// Elements [q, q + count) of a W row (count in [0, 8]) widened to f32, zeros past count.
template <bool kBf16>
inline __m256 load_w_tail(const void* row, std::int64_t q, std::int64_t count) {
  if constexpr (kBf16) {
    alignas(16) std::uint16_t part[8] = {};
    std::memcpy(part, static_cast<const std::uint16_t*>(row) + q,
                static_cast<std::size_t>(count) * 2);
    const __m128i half = _mm_load_si128(reinterpret_cast<const __m128i*>(part));
    return _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_cvtepu16_epi32(half), 16));
  } else {
    alignas(32) float part[8] = {};
    std::memcpy(part, static_cast<const float*>(row) + q, static_cast<std::size_t>(count) * 4);
    return _mm256_load_ps(part);
  }
}

inline __m256 load_x_tail(const float* x, std::int64_t q, std::int64_t count) {
  alignas(32) float part[8] = {};
  std::memcpy(part, x + q, static_cast<std::size_t>(count) * 4);
  return _mm256_load_ps(part);
}

// The fixed final reduction of four accumulators at once (see the file comment): for each,
// ((l0 + l1) + (l2 + l3)) + ((l4 + l5) + (l6 + l7)), written to out[0..3].
inline void reduce4(__m256 a, __m256 b, __m256 c, __m256 d, float* out) {
  const __m256 pairs = _mm256_hadd_ps(_mm256_hadd_ps(a, b), _mm256_hadd_ps(c, d));
  _mm_storeu_ps(out, _mm_add_ps(_mm256_castps256_ps128(pairs), _mm256_extractf128_ps(pairs, 1)));
}

// y[i0 + r][j0 + c] for r < kR, c < kC.
template <int kR, int kC, bool kBf16>
inline void tile(const SkinnyMatmulParams& p, std::int64_t i0, std::int64_t j0) {
  const std::int64_t k = p.k;
  const float* xs[kR];
  for (int r = 0; r < kR; ++r) xs[r] = p.x + (i0 + r) * p.x_row_stride;
  const void* ws[kC];
  for (int c = 0; c < kC; ++c)
    ws[c] = static_cast<const char*>(p.w) +
            static_cast<std::size_t>((j0 + c) * p.w_row_stride) * (kBf16 ? 2 : 4);
  __m256 acc[kR][kC];
  for (int r = 0; r < kR; ++r)
    for (int c = 0; c < kC; ++c) acc[r][c] = _mm256_setzero_ps();
  std::int64_t q = 0;
  for (; q + 8 <= k; q += 8) {
    __m256 xv[kR];
    for (int r = 0; r < kR; ++r) xv[r] = _mm256_loadu_ps(xs[r] + q);
    for (int c = 0; c < kC; ++c) {
      const __m256 wv = load_w<kBf16>(ws[c], q);
      for (int r = 0; r < kR; ++r) acc[r][c] = _mm256_fmadd_ps(xv[r], wv, acc[r][c]);
    }
  }
  if (q < k) {  // zero-padded tail: lanes past k add 0 * 0
    __m256 xv[kR];
    for (int r = 0; r < kR; ++r) xv[r] = load_x_tail(xs[r], q, k - q);
    for (int c = 0; c < kC; ++c) {
      const __m256 wv = load_w_tail<kBf16>(ws[c], q, k - q);
      for (int r = 0; r < kR; ++r) acc[r][c] = _mm256_fmadd_ps(xv[r], wv, acc[r][c]);
    }
  }
  for (int r = 0; r < kR; ++r) {
    // Up to four sums at once; missing columns reduce zeros (lanes never mix).
    const __m256 zero = _mm256_setzero_ps();
    float sums[4];
    reduce4(acc[r][0], kC > 1 ? acc[r][kC > 1 ? 1 : 0] : zero,
            kC > 2 ? acc[r][kC > 2 ? 2 : 0] : zero, kC > 3 ? acc[r][kC > 3 ? 3 : 0] : zero, sums);
    for (int c = 0; c < kC; ++c) p.y[(i0 + r) * p.y_row_stride + j0 + c] = sums[c];
  }
}

// Rows [i0, i0 + kR) of x against W rows [j_begin, j_end): tiles of 4, then the last 1-3.
template <int kR, bool kBf16>
inline void strip(const SkinnyMatmulParams& p, std::int64_t i0, std::int64_t j_begin,
                  std::int64_t j_end) {
  std::int64_t j = j_begin;
  for (; j + 4 <= j_end; j += 4) tile<kR, 4, kBf16>(p, i0, j);
  switch (j_end - j) {
    case 3:
      tile<kR, 3, kBf16>(p, i0, j);
      break;
    case 2:
      tile<kR, 2, kBf16>(p, i0, j);
      break;
    case 1:
      tile<kR, 1, kBf16>(p, i0, j);
      break;
    default:
      break;
  }
}

template <bool kBf16>
void rows(const SkinnyMatmulParams& p, std::int64_t j_begin, std::int64_t j_end) {
  for (std::int64_t ib = 0; ib < p.m; ib += kBlockRowsOfX) {
    const std::int64_t ie = std::min(p.m, ib + kBlockRowsOfX);
    for (std::int64_t jb = j_begin; jb < j_end; jb += kChunkRows) {
      const std::int64_t je = std::min(j_end, jb + kChunkRows);
      std::int64_t i = ib;
      for (; i + 3 <= ie; i += 3) strip<3, kBf16>(p, i, jb, je);
      if (ie - i == 2) strip<2, kBf16>(p, i, jb, je);
      if (ie - i == 1) strip<1, kBf16>(p, i, jb, je);
    }
  }
}

}  // namespace

void rows_avx2(const SkinnyMatmulParams& p, std::int64_t j_begin, std::int64_t j_end) {
  if (p.w_type == SkinnyWeightType::kBF16) {
    rows<true>(p, j_begin, j_end);
  } else {
    rows<false>(p, j_begin, j_end);
  }
}

}  // namespace patchbay::kernels::skinny_rows
