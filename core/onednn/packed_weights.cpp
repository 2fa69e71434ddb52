// Direct packing of f32 and bf16 weights into oneDNN blocked layouts (see packed_weights.hpp).
#include "onednn/packed_weights.hpp"

#include <algorithm>
#include <cstring>

namespace patchbay::onednn::detail {

void pack_f32_ba16a64b(const float* src, std::int64_t ldb, std::int64_t k, std::int64_t n,
                       float* dst) {
  constexpr std::int64_t kRows = 16, kCols = 64, kBlock = kRows * kCols;
  const std::int64_t row_blocks = (k + kRows - 1) / kRows;
  const std::int64_t col_blocks = (n + kCols - 1) / kCols;
  // One task per row block, reading its 16 rows front to back: read column-block-first,
  // the 16 pieces of a block sit one row pitch apart, and with GPT-2's 12 KiB pitch they
  // all map onto the same cache sets.
#pragma omp parallel for schedule(static) if (k * n >= (1 << 16))
  for (std::int64_t rb = 0; rb < row_blocks; ++rb) {
    for (std::int64_t r = 0; r < kRows; ++r) {
      const std::int64_t row = rb * kRows + r;
      for (std::int64_t cb = 0; cb < col_blocks; ++cb) {
        float* out = dst + (cb * row_blocks + rb) * kBlock + r * kCols;
        const std::int64_t c0 = cb * kCols;
        const std::int64_t cols = row < k ? std::min(kCols, n - c0) : 0;
        if (cols > 0)
          std::memcpy(out, src + row * ldb + c0, static_cast<std::size_t>(cols) * sizeof(float));
        if (cols < kCols)
          std::memset(out + cols, 0, static_cast<std::size_t>(kCols - cols) * sizeof(float));
      }
    }
  }
}

}  // namespace patchbay::onednn::detail

#if defined(__x86_64__)
#include <immintrin.h>
#endif

namespace patchbay::onednn::detail {
namespace {

constexpr std::int64_t kPairRows = 32, kPairCols = 64, kPairBlock = kPairRows * kPairCols;

struct PairBlocks {
  std::int64_t row_blocks, col_blocks;
};

PairBlocks pair_blocks(std::int64_t k, std::int64_t n) {
  return {(k + kPairRows - 1) / kPairRows, (n + kPairCols - 1) / kPairCols};
}

#if defined(__x86_64__)
#define PB_AVX512 __attribute__((target("avx512f,avx512bw")))
// GCC 12's unpack and shuffle intrinsics pass _mm512_undefined_epi32() as the unused merge
// source, which -Wmaybe-uninitialized reports inside functions with a target attribute.
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"

// B stored [k, n]: per row pair and 64 columns, two 64-byte loads of each row interleaved by
// two vpermt2w. One task per block of 32 rows; each 4 KiB block is written whole, in order
// (writing one row pair across all column blocks instead put the pieces 4 KiB x row blocks
// apart, on the same L1 sets, and ran 2x slower), the next block's columns prefetched.
PB_AVX512 void pack_bf16_plain_avx512(const std::uint16_t* src, std::int64_t ld, std::int64_t k,
                                      std::int64_t n, std::uint16_t* dst) {
  const PairBlocks blocks = pair_blocks(k, n);
  // Words i < 16 of the first result: (even[i], odd[i]); of the second: (even[16+i], odd[16+i]).
  const __m512i first = _mm512_set_epi16(47, 15, 46, 14, 45, 13, 44, 12, 43, 11, 42, 10, 41, 9, 40,
                                         8, 39, 7, 38, 6, 37, 5, 36, 4, 35, 3, 34, 2, 33, 1, 32, 0);
  const __m512i second = _mm512_add_epi16(first, _mm512_set1_epi16(16));
#pragma omp parallel for schedule(static) if (k * n >= (1 << 16))
  for (std::int64_t rb = 0; rb < blocks.row_blocks; ++rb) {
    for (std::int64_t cb = 0; cb < blocks.col_blocks; ++cb) {
      std::uint16_t* out = dst + (cb * blocks.row_blocks + rb) * kPairBlock;
      const std::int64_t c0 = cb * kPairCols;
      for (std::int64_t pair = 0; pair < kPairRows / 2; ++pair) {
        const std::int64_t row = rb * kPairRows + 2 * pair;
        // Rows past k (padding) are never addressed.
        const std::uint16_t* even = row < k ? src + row * ld + c0 : nullptr;
        const std::uint16_t* odd = row + 1 < k ? even + ld : nullptr;
        if (odd != nullptr) {
          for (std::int64_t ahead : {2 * kPairCols, 2 * kPairCols + 32}) {
            _mm_prefetch(reinterpret_cast<const char*>(even + ahead), _MM_HINT_T0);
            _mm_prefetch(reinterpret_cast<const char*>(odd + ahead), _MM_HINT_T0);
          }
        }
        for (std::int64_t half = 0; half < 2; ++half) {
          const std::int64_t live = std::min<std::int64_t>(n - c0 - 32 * half, 32);
          const __mmask32 mask = live >= 32 ? ~0u : live <= 0 ? 0u : (1u << live) - 1u;
          const __m512i e =
              even != nullptr ? _mm512_maskz_loadu_epi16(mask, even + 32 * half) : __m512i{};
          const __m512i o =
              odd != nullptr ? _mm512_maskz_loadu_epi16(mask, odd + 32 * half) : __m512i{};
          std::uint16_t* at = out + pair * 2 * kPairCols + 64 * half;
          _mm512_storeu_si512(at, _mm512_permutex2var_epi16(e, first, o));
          _mm512_storeu_si512(at + 32, _mm512_permutex2var_epi16(e, second, o));
        }
      }
    }
  }
}

// r[i] word j -> r[j] word i (a 16 x 16 transpose of 32-bit words): unpack 32, unpack 64,
// then two rounds of 128-bit lane shuffles.
PB_AVX512 inline void transpose_words_16x16(__m512i r[16]) {
  __m512i t[16];
  for (int i = 0; i < 8; ++i) {
    t[2 * i] = _mm512_unpacklo_epi32(r[2 * i], r[2 * i + 1]);
    t[2 * i + 1] = _mm512_unpackhi_epi32(r[2 * i], r[2 * i + 1]);
  }
  for (int i = 0; i < 4; ++i) {
    for (int j = 0; j < 2; ++j) {
      r[4 * i + 2 * j] = _mm512_unpacklo_epi64(t[4 * i + j], t[4 * i + 2 + j]);
      r[4 * i + 2 * j + 1] = _mm512_unpackhi_epi64(t[4 * i + j], t[4 * i + 2 + j]);
    }
  }
  for (int i = 0; i < 2; ++i) {
    for (int j = 0; j < 4; ++j) {
      t[8 * i + j] = _mm512_shuffle_i32x4(r[8 * i + j], r[8 * i + 4 + j], 0x88);
      t[8 * i + 4 + j] = _mm512_shuffle_i32x4(r[8 * i + j], r[8 * i + 4 + j], 0xdd);
    }
  }
  for (int j = 0; j < 8; ++j) {
    r[j] = _mm512_shuffle_i32x4(t[j], t[8 + j], 0x88);
    r[8 + j] = _mm512_shuffle_i32x4(t[j], t[8 + j], 0xdd);
  }
}

// B stored [n, k]: a pair of B's rows at column c is the 32-bit word at src + c * ld + 2j, so
// a block's 16 pairs x 16 columns is a 16 x 16 transpose of words. One task per column block;
// each 16 columns' rows are read front to back (16 streams, prefetched 256 bytes ahead).
PB_AVX512 void pack_bf16_transposed_avx512(const std::uint16_t* src, std::int64_t ld,
                                           std::int64_t k, std::int64_t n, std::uint16_t* dst) {
  const PairBlocks blocks = pair_blocks(k, n);
#pragma omp parallel for schedule(static) if (k * n >= (1 << 16))
  for (std::int64_t cb = 0; cb < blocks.col_blocks; ++cb) {
    for (std::int64_t quarter = 0; quarter < kPairCols / 16; ++quarter) {
      for (std::int64_t rb = 0; rb < blocks.row_blocks; ++rb) {
        const std::int64_t r0 = rb * kPairRows, live = std::min(k - r0, kPairRows);
        const __mmask32 mask = live >= 32 ? ~0u : (1u << live) - 1u;
        __m512i words[16];
        for (std::int64_t i = 0; i < 16; ++i) {
          const std::int64_t col = cb * kPairCols + quarter * 16 + i;
          const std::uint16_t* at = src + col * ld + r0;
          words[i] = col < n ? _mm512_maskz_loadu_epi16(mask, at) : __m512i{};
          if (col < n) _mm_prefetch(reinterpret_cast<const char*>(at + 4 * kPairRows), _MM_HINT_T0);
        }
        transpose_words_16x16(words);
        std::uint16_t* out = dst + (cb * blocks.row_blocks + rb) * kPairBlock + quarter * 32;
        for (std::int64_t pair = 0; pair < 16; ++pair)
          _mm512_storeu_si512(out + pair * 2 * kPairCols, words[pair]);
      }
    }
  }
}
#pragma GCC diagnostic pop
#undef PB_AVX512
#endif

}  // namespace

void pack_bf16_portable(const std::uint16_t* src, std::int64_t row_stride, std::int64_t col_stride,
                        std::int64_t k, std::int64_t n, std::uint16_t* dst) {
  const PairBlocks blocks = pair_blocks(k, n);
#pragma omp parallel for schedule(static) if (k * n >= (1 << 16))
  for (std::int64_t cb = 0; cb < blocks.col_blocks; ++cb) {
    for (std::int64_t rb = 0; rb < blocks.row_blocks; ++rb) {
      std::uint16_t* out = dst + (cb * blocks.row_blocks + rb) * kPairBlock;
      for (std::int64_t at = 0; at < kPairBlock; ++at) {
        const std::int64_t row = rb * kPairRows + at / (2 * kPairCols) * 2 + at % 2;
        const std::int64_t col = cb * kPairCols + at / 2 % kPairCols;
        out[at] = row < k && col < n ? src[row * row_stride + col * col_stride] : 0;
      }
    }
  }
}

void pack_bf16_ba16a64b2a(const std::uint16_t* src, std::int64_t row_stride,
                          std::int64_t col_stride, std::int64_t k, std::int64_t n,
                          std::uint16_t* dst) {
#if defined(__x86_64__)
  static const bool avx512 = __builtin_cpu_supports("avx512bw");
  if (avx512 && col_stride == 1) return pack_bf16_plain_avx512(src, row_stride, k, n, dst);
  if (avx512 && row_stride == 1) return pack_bf16_transposed_avx512(src, col_stride, k, n, dst);
#endif
  pack_bf16_portable(src, row_stride, col_stride, k, n, dst);
}

}  // namespace patchbay::onednn::detail
