// Flash attention with bf16 operands and f32 accumulation (AttentionParams::q_bf16 ...), for
// x86-64 CPUs with AVX512-BF16. Built with -mavx512bf16 (CMakeLists.txt) and entered only
// after attention_params_error has checked the CPU, so everything here has internal linkage
// but the three entry points (attention_flash_tiles.hpp says why no inline function or
// template may be shared with the other ISA builds).
//
// The tiling, the schedules and the f32 softmax are those of the f32 kernel
// (attention_flash.cpp, attention_flash_tiles_body.inc): scores key-major (s_t[key][query],
// so the online-softmax statistics of 16 queries update as one vector), forward tasks per
// query tile, backward tasks per key tile with a per-thread dq accumulator and a fixed round
// robin (bit-reproducible). What differs is the products: each is
//   C[M][N] (+)= A[M][K] * B[K][N]  with bf16 A and B and f32 C,
// run by vdpbf16ps, which multiplies PAIRS of bf16 along the depth K and adds both products
// into one f32 lane. So A is read as 32-bit words (two neighbours along K, broadcast), and B
// is stored "pair-interleaved": row p of B holds, per column n, the word (B[2p][n],
// B[2p+1][n]). Every operand is laid out so that the pair is contiguous in memory:
//   forward   S^T  = K Q^T     A = K rows (pairs along D, as stored)   B = Q^T as words  [D/2][Br]
//             O^T += V^T P^T   A = V tile rows interleaved [keys/2][D] B = P^T interleaved [Bc/2][Br]
//   backward  S^T  = K Q^T, dP^T = V dO^T      as the forward, B shared per call  [D/2][Tq]
//             dV  += P^T dO,  dK += dS^T Q     A = P^T, dS^T in bf16 rows (pairs along queries)
//                                              B = dO, Q rows interleaved, shared [Tq/2][dp]
//             dQ  += dS K                      A = dS^T interleaved [Bc/2][Br]
//                                              B = K tile rows interleaved [keys/2][dp]
// P is rounded to bf16 only for the products (the row sums l use the f32 values) and dS
// likewise; scores, the running max and sum, lse, delta = rowsum(dO * O) and every
// accumulator stay f32. The score scale is applied to the f32 scores (not folded into a
// rounded Q). Odd key or query counts pad the pair with a zero.
// GCC 12's AVX-512 headers build _mm512_cvtepu16_epi32 and _mm512_slli_epi32 from
// _mm512_undefined_*(), which -Wmaybe-uninitialized reports wherever they are inlined (GCC bug
// 105593, a false positive), as in skinny_matmul_avx512.cpp.
#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#include <immintrin.h>
#include <omp.h>

#include <cstdint>
#include <cstring>

#include "attention_flash_bf16.hpp"
#include "attention_flash_tiles.hpp"

namespace patchbay::kernels::flash_bf16 {
namespace {

using flash_tiles::kKeyTile;
using flash_tiles::kQueryTile;
using flash_tiles::WindowSides;

typedef float vf __attribute__((vector_size(64)));
typedef std::int32_t vfi __attribute__((vector_size(64)));
constexpr int kLanes = 16;
constexpr float kInf = __builtin_inff();

#define PB_INLINE inline __attribute__((always_inline))

PB_INLINE vf loadv(const float* p) {
  vf v;
  std::memcpy(&v, p, sizeof v);
  return v;
}
PB_INLINE void storev(float* p, vf v) { std::memcpy(p, &v, sizeof v); }
PB_INLINE vf splat(float x) { return vf{} + x; }
PB_INLINE vf vmax(vf a, vf b) { return a > b ? a : b; }

#include "attention_flash_tile_math.inc"

std::int64_t round_up16(std::int64_t x) { return (x + 15) / 16 * 16; }
std::int64_t min64(std::int64_t a, std::int64_t b) { return a < b ? a : b; }
std::int64_t max64(std::int64_t a, std::int64_t b) { return a > b ? a : b; }

const std::uint16_t* row_of(const std::uint16_t* base, const AttentionStrides& s, std::int64_t b,
                            std::int64_t h, std::int64_t t) {
  return base + b * s.batch + h * s.head + t * s.seq;
}
float* row_of(float* base, const AttentionStrides& s, std::int64_t b, std::int64_t h,
              std::int64_t t) {
  return base + b * s.batch + h * s.head + t * s.seq;
}

PB_INLINE std::uint32_t pair_at(const std::uint16_t* p) {
  std::uint32_t word;
  std::memcpy(&word, p, sizeof word);
  return word;
}

// ---- bf16 micro GEMM ---------------------------------------------------------------------

// C[R][16*NV] = alpha * A[R][2*pairs] * B[2*pairs][16*NV] (+ C when accumulate). A(i, pair
// p) is the two bf16 at a + i*a_rs + p*a_cs (uint16 units); B row p is 16*NV pair words at
// b + p*ldb (words).
// Not inlined: inlined into gemm_columns, GCC hoisted the epilogue's broadcast of alpha out of
// the row loop, and with that vector (and alpha) live across the pairs loop the 6 x 4 block
// spilled two of its four B vectors to the stack every step (10 reloads per 24 vdpbf16ps);
// as a function of its own the loop holds 24 accumulators, 4 B vectors and the broadcast A in
// registers. One call per block of up to 8 rows x 64 columns costs nothing measurable.
template <int R, int NV>
__attribute__((noinline)) void gemm_block(std::int64_t pairs, const std::uint16_t* a,
                                          std::int64_t a_rs, std::int64_t a_cs,
                                          const std::uint32_t* b, std::int64_t ldb, float* c,
                                          std::int64_t ldc, float alpha, bool accumulate) {
  __m512 acc[R][NV];
#pragma GCC unroll 16
  for (int i = 0; i < R; ++i) {
#pragma GCC unroll 8
    for (int j = 0; j < NV; ++j) acc[i][j] = _mm512_setzero_ps();
  }
  for (std::int64_t p = 0; p < pairs; ++p) {
    __m512bh bv[NV];
#pragma GCC unroll 8
    for (int j = 0; j < NV; ++j) bv[j] = (__m512bh)_mm512_loadu_si512(b + p * ldb + 16 * j);
    const std::uint16_t* ap = a + p * a_cs;
#pragma GCC unroll 16
    for (int i = 0; i < R; ++i) {
      const __m512bh av = (__m512bh)_mm512_set1_epi32(int(pair_at(ap + i * a_rs)));
#pragma GCC unroll 8
      for (int j = 0; j < NV; ++j) acc[i][j] = _mm512_dpbf16_ps(acc[i][j], av, bv[j]);
    }
  }
  const __m512 scale = _mm512_set1_ps(alpha);
#pragma GCC unroll 16
  for (int i = 0; i < R; ++i) {
#pragma GCC unroll 8
    for (int j = 0; j < NV; ++j) {
      float* cij = c + i * ldc + 16 * j;
      _mm512_storeu_ps(cij, accumulate ? _mm512_fmadd_ps(acc[i][j], scale, _mm512_loadu_ps(cij))
                                       : _mm512_mul_ps(acc[i][j], scale));
    }
  }
}

// 24 accumulators + NV B vectors + 1 broadcast A stay within the 32 zmm registers.
constexpr int rows_per_block(int nv) { return 24 / nv > 8 ? 8 : 24 / nv; }

template <int R, int NV>
PB_INLINE void gemm_row_tail(std::int64_t rem, std::int64_t pairs, const std::uint16_t* a,
                             std::int64_t a_rs, std::int64_t a_cs, const std::uint32_t* b,
                             std::int64_t ldb, float* c, std::int64_t ldc, float alpha,
                             bool accumulate) {
  if constexpr (R > 0) {
    if (rem == R) {
      gemm_block<R, NV>(pairs, a, a_rs, a_cs, b, ldb, c, ldc, alpha, accumulate);
    } else {
      gemm_row_tail<R - 1, NV>(rem, pairs, a, a_rs, a_cs, b, ldb, c, ldc, alpha, accumulate);
    }
  }
}

template <int NV>
void gemm_columns(std::int64_t m, std::int64_t pairs, const std::uint16_t* a, std::int64_t a_rs,
                  std::int64_t a_cs, const std::uint32_t* b, std::int64_t ldb, float* c,
                  std::int64_t ldc, float alpha, bool accumulate) {
  constexpr int R = rows_per_block(NV);
  std::int64_t i = 0;
  for (; i + R <= m; i += R)
    gemm_block<R, NV>(pairs, a + i * a_rs, a_rs, a_cs, b, ldb, c + i * ldc, ldc, alpha,
                      accumulate);
  gemm_row_tail<R - 1, NV>(m - i, pairs, a + i * a_rs, a_rs, a_cs, b, ldb, c + i * ldc, ldc,
                           alpha, accumulate);
}

// C[m][n] = alpha * A[m][2*pairs] * B[2*pairs][n] (+ C when accumulate), as above;
// n % 16 == 0.
void bf16_gemm(std::int64_t m, std::int64_t n, std::int64_t pairs, const std::uint16_t* a,
               std::int64_t a_rs, std::int64_t a_cs, const std::uint32_t* b, std::int64_t ldb,
               float* c, std::int64_t ldc, float alpha, bool accumulate) {
  std::int64_t n0 = 0;
  for (; n0 + 64 <= n; n0 += 64)
    gemm_columns<4>(m, pairs, a, a_rs, a_cs, b + n0, ldb, c + n0, ldc, alpha, accumulate);
  const std::int64_t left = (n - n0) / 16;
  if (left == 3)
    gemm_columns<3>(m, pairs, a, a_rs, a_cs, b + n0, ldb, c + n0, ldc, alpha, accumulate);
  if (left == 2)
    gemm_columns<2>(m, pairs, a, a_rs, a_cs, b + n0, ldb, c + n0, ldc, alpha, accumulate);
  if (left == 1)
    gemm_columns<1>(m, pairs, a, a_rs, a_cs, b + n0, ldb, c + n0, ldc, alpha, accumulate);
}

// ---- packing -----------------------------------------------------------------------------

// bf16(even[i]) in lanes 0-15 and bf16(odd[i]) in lanes 16-31, rounded to nearest even (one
// vcvtne2ps2bf16: the same rounding as vcvtneps2bf16).
PB_INLINE __m512i bf16_halves(vf even, vf odd) {
  return (__m512i)_mm512_cvtne2ps_pbh((__m512)odd, (__m512)even);
}

// The words (halves[i], halves[16 + i]) for i < 16: one vpermw.
PB_INLINE __m512i pair_words(__m512i halves) {
  const __m512i interleave =
      _mm512_set_epi16(31, 15, 30, 14, 29, 13, 28, 12, 27, 11, 26, 10, 25, 9, 24, 8,  //
                       23, 7, 22, 6, 21, 5, 20, 4, 19, 3, 18, 2, 17, 1, 16, 0);
  return _mm512_permutexvar_epi16(interleave, halves);
}

// dst[0..16) = (bf16(even[i]), bf16(odd[i])) words, rounded to nearest even. Converting both
// vectors at once and interleaving with vpermw replaced two conversions, two widenings, a shift
// and an or, the softmax loops' busiest instructions (perf, T = 1024): forward 2.71-2.81 ->
// 2.61-2.71 ms, backward 601-646 -> 634-661 GFLOP/s (12 heads, 2 threads, Zen 5).
PB_INLINE void store_pair_words(std::uint32_t* dst, vf even, vf odd) {
  _mm512_storeu_si512(dst, pair_words(bf16_halves(even, odd)));
}

// dst[0..16) = bf16(x[i]), rounded to nearest even.
PB_INLINE void store_bf16(std::uint16_t* dst, vf x) {
  _mm256_storeu_si256(reinterpret_cast<__m256i*>(dst), (__m256i)_mm512_cvtneps_pbh((__m512)x));
}

// first[0..16) = halves' lanes 0-15, second[0..16) = its lanes 16-31.
PB_INLINE void store_halves(std::uint16_t* first, std::uint16_t* second, __m512i halves) {
  _mm256_storeu_si256(reinterpret_cast<__m256i*>(first), _mm512_castsi512_si256(halves));
  _mm256_storeu_si256(reinterpret_cast<__m256i*>(second), _mm512_extracti64x4_epi64(halves, 1));
}

// dst[i] = (even[i], odd[i]) words for i < n, zeros on to n_padded; odd == nullptr pairs
// with zeros (both nullptr: all zeros). Never reads past n nor writes past n_padded.
void interleave_bf16_rows(const std::uint16_t* even, const std::uint16_t* odd, std::int64_t n,
                          std::int64_t n_padded, std::uint32_t* dst) {
  for (std::int64_t i = 0; i < n_padded; i += 16) {
    const std::int64_t live = min64(max64(n - i, 0), 16), room = min64(n_padded - i, 16);
    const __mmask16 load = __mmask16((1u << live) - 1u), store = __mmask16((1u << room) - 1u);
    const __m512i lo = even == nullptr ? _mm512_setzero_si512()
                                       : _mm512_cvtepu16_epi32(_mm256_maskz_loadu_epi16(load, even + i));
    const __m512i hi = odd == nullptr ? _mm512_setzero_si512()
                                      : _mm512_cvtepu16_epi32(_mm256_maskz_loadu_epi16(load, odd + i));
    _mm512_mask_storeu_epi32(dst + i, store, _mm512_or_si512(lo, _mm512_slli_epi32(hi, 16)));
  }
}

PB_INLINE float bf16_to_f32(std::uint16_t x) {
  const std::uint32_t bits = std::uint32_t(x) << 16;
  float f;
  std::memcpy(&f, &bits, sizeof f);
  return f;
}

// ---- scratch -----------------------------------------------------------------------------

// Hands out consecutive 64-byte aligned regions of a buffer (or only counts their bytes).
class Carver {
 public:
  explicit Carver(unsigned char* base) : base_(base) {}
  template <class T>
  T* take(std::int64_t count) {
    T* region = base_ == nullptr ? nullptr : reinterpret_cast<T*>(base_ + used_);
    used_ += (count * std::int64_t(sizeof(T)) + 63) / 64 * 64;
    return region;
  }
  std::int64_t used() const { return used_; }

 private:
  unsigned char* base_;
  std::int64_t used_ = 0;
};

struct ForwardScratch {
  std::uint32_t* q_words;  // [D/2][kQueryTile]  Q tile, pairs along D, transposed; pad 0
  float* s_t;              // [kKeyTile][kQueryTile]  scores (f32)
  std::uint32_t* p_words;  // [kKeyTile/2][kQueryTile]  P^T, pairs of keys
  float* o_t;              // [D][kQueryTile]  unnormalised O^T
  float* row_max;          // [kQueryTile]
  float* row_sum;          // [kQueryTile]
  float* alpha;            // [kQueryTile]
};

ForwardScratch carve_forward(Carver& carver, std::int64_t d) {
  ForwardScratch s{};
  s.q_words = carver.take<std::uint32_t>(d / 2 * kQueryTile);
  s.s_t = carver.take<float>(kKeyTile * kQueryTile);
  s.p_words = carver.take<std::uint32_t>(kKeyTile / 2 * kQueryTile);
  s.o_t = carver.take<float>(d * kQueryTile);
  s.row_max = carver.take<float>(kQueryTile);
  s.row_sum = carver.take<float>(kQueryTile);
  s.alpha = carver.take<float>(kQueryTile);
  return s;
}

struct BackwardScratch {
  std::uint32_t* k_words;   // [kKeyTile/2][dp]  K tile, pairs of keys, zero padded
  float* p_t;               // [kKeyTile][kQueryTile]  scores S^T (f32)
  float* ds_t;              // [kKeyTile][kQueryTile]  dP^T (f32)
  std::uint16_t* p_bf16;    // [kKeyTile][kQueryTile]  P^T rounded
  std::uint16_t* ds_bf16;   // [kKeyTile][kQueryTile]  dS^T rounded
  std::uint32_t* ds_words;  // [kKeyTile/2][kQueryTile]  dS^T, pairs of keys
  float* dk;                // [kKeyTile][dp]
  float* dv;                // [kKeyTile][dp]
  float* row_lse;           // [kQueryTile]
  float* row_delta;         // [kQueryTile]
};

BackwardScratch carve_backward(Carver& carver, std::int64_t d) {
  const std::int64_t dp = round_up16(d);
  BackwardScratch s{};
  s.k_words = carver.take<std::uint32_t>(kKeyTile / 2 * dp);
  s.p_t = carver.take<float>(kKeyTile * kQueryTile);
  s.ds_t = carver.take<float>(kKeyTile * kQueryTile);
  s.p_bf16 = carver.take<std::uint16_t>(kKeyTile * kQueryTile);
  s.ds_bf16 = carver.take<std::uint16_t>(kKeyTile * kQueryTile);
  s.ds_words = carver.take<std::uint32_t>(kKeyTile / 2 * kQueryTile);
  s.dk = carver.take<float>(kKeyTile * dp);
  s.dv = carver.take<float>(kKeyTile * dp);
  s.row_lse = carver.take<float>(kQueryTile);
  s.row_delta = carver.take<float>(kQueryTile);
  return s;
}

// V of every kv head as pairs of keys, [B][Hkv][ceil(Tk/2)][D] words (the last pair of an
// odd Tk padded with zeros): the forward's A operand of O^T += V^T P^T, packed once per call
// rather than once per query tile.
std::uint32_t* carve_v_pairs(Carver& carver, const AttentionParams& p) {
  return carver.take<std::uint32_t>(p.batch * p.kv_heads * ((p.kv_len + 1) / 2) * p.head_dim);
}

// Per-call buffers of the backward shared by all threads ([B][H] blocks; tq_pad = Tq rounded
// up to 16; everything past Tq and past D is zero).
struct Shared {
  float* delta;             // [B][H][Tq]            rowsum(dO * O), f32
  std::uint32_t* q_words;   // [B][H][D/2][tq_pad]   Q^T, pairs along D
  std::uint32_t* do_words;  // [B][H][D/2][tq_pad]   dO^T, pairs along D
  std::uint32_t* q_rows;    // [B][H][tq_pad/2][dp]  Q, pairs of queries
  std::uint32_t* do_rows;   // [B][H][tq_pad/2][dp]  dO, pairs of queries
  std::int64_t tq_pad;
};

Shared carve_shared(Carver& carver, const AttentionParams& p) {
  const std::int64_t bh = p.batch * p.heads, tq_pad = round_up16(p.q_len);
  const std::int64_t dp = round_up16(p.head_dim);
  Shared s{};
  s.delta = carver.take<float>(bh * p.q_len);
  s.q_words = carver.take<std::uint32_t>(bh * p.head_dim / 2 * tq_pad);
  s.do_words = carver.take<std::uint32_t>(bh * p.head_dim / 2 * tq_pad);
  s.q_rows = carver.take<std::uint32_t>(bh * tq_pad / 2 * dp);
  s.do_rows = carver.take<std::uint32_t>(bh * tq_pad / 2 * dp);
  s.tq_pad = tq_pad;
  return s;
}

std::int64_t dq_acc_floats(const AttentionParams& p) {
  return p.batch * p.heads * p.q_len * round_up16(p.head_dim);
}

std::int64_t per_thread_bytes(const AttentionParams& p, AttentionPass pass) {
  Carver counter(nullptr);
  if (pass == AttentionPass::forward) {
    carve_forward(counter, p.head_dim);
  } else {
    carve_backward(counter, p.head_dim);
    counter.take<float>(dq_acc_floats(p));
  }
  return counter.used();
}

std::int64_t shared_bytes(const AttentionParams& p, AttentionPass pass) {
  Carver counter(nullptr);
  if (pass == AttentionPass::forward) {
    carve_v_pairs(counter, p);
  } else {
    carve_shared(counter, p);
  }
  return counter.used();
}


// As the f32 kernel: below ~2^20 multiply-adds a call stays on the calling thread.
bool worth_threads(const AttentionParams& p) {
  return double(p.batch) * double(p.heads) * double(p.q_len) * double(p.kv_len) *
             double(p.head_dim) >=
         double(1 << 20);
}

// Threads a call runs on (and sizes its scratch for): one below the threshold above.
int thread_count(const AttentionParams& p) {
  if (!worth_threads(p)) return 1;
  return p.num_threads > 0 ? p.num_threads : omp_get_max_threads();
}


// ---- forward -----------------------------------------------------------------------------

// Inside the parallel region (an `omp for` with its barrier): fills v_pairs.
void fill_v_pairs(const AttentionParams& p, std::uint32_t* v_pairs) {
  const std::int64_t pairs = (p.kv_len + 1) / 2, d = p.head_dim;
#pragma omp for schedule(static)
  for (std::int64_t row = 0; row < p.batch * p.kv_heads * pairs; ++row) {
    const std::int64_t bhk = row / pairs, t = row % pairs * 2;
    const std::int64_t b = bhk / p.kv_heads, hk = bhk % p.kv_heads;
    interleave_bf16_rows(row_of(p.v_bf16, p.v_strides, b, hk, t),
                         t + 1 < p.kv_len ? row_of(p.v_bf16, p.v_strides, b, hk, t + 1) : nullptr,
                         d, d, v_pairs + row * d);
  }  // implicit barrier
}

void forward_query_tile(const AttentionParams& p, std::int64_t b, std::int64_t h, std::int64_t q0,
                        std::int64_t rows, const std::uint32_t* v_pairs, const ForwardScratch& s) {
  const std::int64_t d = p.head_dim, d_pairs = d / 2, cols = round_up16(rows);
  const std::int64_t hk = h / (p.heads / p.kv_heads);
  const std::int64_t offset = p.kv_len - p.q_len;  // bottom-right alignment
  std::int64_t key_begin = 0, key_end = p.kv_len;
  if (p.causal) key_end = min64(key_end, q0 + rows + offset);
  if (p.window > 0) {
    key_begin = max64(0, q0 + offset - p.window + 1) / 2 * 2;  // even: whole V pairs (the key
                                                                // added is outside the window)
    if (two_sided_window(p, WindowSides::flash))
      key_end = min64(key_end, q0 + rows - 1 + offset + p.window);
  }
  float* lse = p.lse + (b * p.heads + h) * p.q_len + q0;

  // Q tile as words [D/2][cols]: column r holds row q0 + r's pairs; padding columns zero.
  for (std::int64_t r = 0; r < cols; ++r) {
    const std::uint16_t* q_row = r < rows ? row_of(p.q_bf16, p.q_strides, b, h, q0 + r) : nullptr;
    for (std::int64_t x = 0; x < d_pairs; ++x)
      s.q_words[x * kQueryTile + r] = q_row != nullptr ? pair_at(q_row + 2 * x) : 0u;
  }
  for (std::int64_t r = 0; r < cols; r += kLanes) {
    storev(s.row_max + r, splat(-kInf));
    storev(s.row_sum + r, vf{});
  }
  for (std::int64_t x = 0; x < d; ++x)
    for (std::int64_t r = 0; r < cols; r += kLanes) storev(s.o_t + x * kQueryTile + r, vf{});

  for (std::int64_t k0 = key_begin; k0 < key_end; k0 += kKeyTile) {
    const std::int64_t keys = min64(kKeyTile, key_end - k0);
    // S^T[keys][cols] = scale * K_tile Q^T (the scale applied to the f32 sums).
    bf16_gemm(keys, cols, d_pairs, row_of(p.k_bf16, p.k_strides, b, hk, k0), p.k_strides.seq, 2,
              s.q_words, kQueryTile, s.s_t, kQueryTile, p.scale, false);
    if (p.alibi_slopes != nullptr ||
        tile_has_hidden(p, WindowSides::flash, keys, k0, q0, offset, cols)) {
      bias_and_mask(p, WindowSides::flash, h, s.s_t, keys, k0, q0, offset, cols);
    }
    // Online softmax, 16 queries per vector (as the f32 kernel).
    bool rescale = false;
    for (std::int64_t r = 0; r < cols; r += kLanes) {
      const vf tile_max = key_max(s.s_t, keys, r);
      const vf old_max = loadv(s.row_max + r);
      const vf new_max = vmax(old_max, tile_max);
      const vf safe_max = new_max == splat(-kInf) ? vf{} : new_max;
      const vf a = expv(old_max - safe_max);
      vf sum = loadv(s.row_sum + r) * a;
      // P straight into pairs of keys (the B operand of O^T += V^T P^T); the sum takes the f32
      // values. A key past `keys` in the last pair gets P = 0.
      for (std::int64_t c = 0; c < keys; c += 2) {
        const vf even = expv(loadv(s.s_t + c * kQueryTile + r) - safe_max);
        sum += even;
        vf odd{};
        if (c + 1 < keys) {
          odd = expv(loadv(s.s_t + (c + 1) * kQueryTile + r) - safe_max);
          sum += odd;
        }
        store_pair_words(s.p_words + c / 2 * kQueryTile + r, even, odd);
      }
      storev(s.row_sum + r, sum);
      storev(s.row_max + r, new_max);
      storev(s.alpha + r, a);
      for (int lane = 0; lane < kLanes; ++lane) rescale |= a[lane] != 1.0f;
    }
    if (rescale) {
      for (std::int64_t x = 0; x < d; ++x)
        for (std::int64_t r = 0; r < cols; r += kLanes)
          storev(s.o_t + x * kQueryTile + r,
                 loadv(s.o_t + x * kQueryTile + r) * loadv(s.alpha + r));
    }
    // O^T[D][cols] += V_tile^T P^T: A = V pairs of keys [keys/2][D] (k0 is even), B = P^T
    // pairs of keys (written by the softmax above).
    const std::int64_t key_pairs = (keys + 1) / 2;
    const std::uint32_t* v_tile =
        v_pairs + ((b * p.kv_heads + hk) * ((p.kv_len + 1) / 2) + k0 / 2) * d;
    bf16_gemm(d, cols, key_pairs, reinterpret_cast<const std::uint16_t*>(v_tile), 2, 2 * d,
              s.p_words, kQueryTile, s.o_t, kQueryTile, 1.0f, true);
  }

  for (std::int64_t r = 0; r < rows; ++r) {
    float* out = row_of(p.out, p.out_strides, b, h, q0 + r);
    const float l = s.row_sum[r];
    if (!(l > 0.0f)) {  // no visible key: documented output 0, lse -inf
      std::memset(out, 0, sizeof(float) * std::size_t(d));
      lse[r] = -kInf;
      continue;
    }
    const float inv = 1.0f / l;
    for (std::int64_t x = 0; x < d; ++x) out[x] = s.o_t[x * kQueryTile + r] * inv;
    lse[r] = s.row_max[r] + __builtin_logf(l);
  }
}

// ---- backward ----------------------------------------------------------------------------

// Inside the parallel region (an `omp for` with its barrier): fills `shared`.
void fill_shared(const AttentionParams& p, const Shared& shared) {
  const std::int64_t d = p.head_dim, d_pairs = d / 2, dp = round_up16(d);
  const std::int64_t tq_pad = shared.tq_pad, row_blocks = tq_pad / 16;
#pragma omp for schedule(static)
  for (std::int64_t block = 0; block < p.batch * p.heads * row_blocks; ++block) {
    const std::int64_t bh = block / row_blocks, b = bh / p.heads, h = bh % p.heads;
    const std::int64_t t0 = block % row_blocks * 16;
    std::uint32_t* q_words = shared.q_words + bh * d_pairs * tq_pad + t0;
    std::uint32_t* do_words = shared.do_words + bh * d_pairs * tq_pad + t0;
    const std::uint16_t* q_rows[16];
    const std::uint16_t* do_rows[16];
    const std::int64_t live = min64(max64(p.q_len - t0, 0), 16);
    for (std::int64_t r = 0; r < live; ++r) {
      const std::int64_t t = t0 + r;
      q_rows[r] = row_of(p.q_bf16, p.q_strides, b, h, t);
      do_rows[r] = row_of(p.dout_bf16, p.dout_strides, b, h, t);
      const float* o = row_of(p.out, p.out_strides, b, h, t);
      float sum = 0.0f;
#pragma omp simd reduction(+ : sum)
      for (std::int64_t x = 0; x < d; ++x) sum += o[x] * bf16_to_f32(do_rows[r][x]);
      shared.delta[bh * p.q_len + t] = sum;
    }
    // One 64-byte line of each transposed row per pair x; rows past Tq are zero.
    for (std::int64_t x = 0; x < d_pairs; ++x) {
      for (std::int64_t r = 0; r < 16; ++r) {
        q_words[x * tq_pad + r] = r < live ? pair_at(q_rows[r] + 2 * x) : 0u;
        do_words[x * tq_pad + r] = r < live ? pair_at(do_rows[r] + 2 * x) : 0u;
      }
    }
    for (std::int64_t t = t0; t < t0 + 16; t += 2) {
      const std::int64_t pair_row = bh * (tq_pad / 2) + t / 2;
      auto rows_of = [&](const std::uint16_t* base, const AttentionStrides& st, std::uint32_t* dst) {
        if (t >= p.q_len) {
          interleave_bf16_rows(nullptr, nullptr, 0, dp, dst);
          return;
        }
        interleave_bf16_rows(row_of(base, st, b, h, t),
                             t + 1 < p.q_len ? row_of(base, st, b, h, t + 1) : nullptr, d, dp, dst);
      };
      rows_of(p.q_bf16, p.q_strides, shared.q_rows + pair_row * dp);
      rows_of(p.dout_bf16, p.dout_strides, shared.do_rows + pair_row * dp);
    }
  }  // implicit barrier
}

void backward_key_tile(const AttentionParams& p, std::int64_t b, std::int64_t hk, std::int64_t k0,
                       std::int64_t keys, const Shared& shared, float* dq_acc,
                       const BackwardScratch& s) {
  const std::int64_t d = p.head_dim, d_pairs = d / 2, dp = round_up16(d);
  const std::int64_t group = p.heads / p.kv_heads;
  const std::int64_t offset = p.kv_len - p.q_len;
  const std::int64_t tq_pad = shared.tq_pad, key_pairs = (keys + 1) / 2;
  std::int64_t q_begin = 0, q_end = p.q_len;
  if (p.causal) q_begin = max64(0, k0 - offset);
  if (p.window > 0) {
    q_end = min64(q_end, k0 + keys - 1 + p.window - offset);
    if (two_sided_window(p, WindowSides::flash))
      q_begin = max64(q_begin, k0 - p.window + 1 - offset);
  }
  q_begin = q_begin / 16 * 16;  // whole vectors, and even (query pairs stay aligned)
  const std::uint16_t* k_tile = row_of(p.k_bf16, p.k_strides, b, hk, k0);
  const std::uint16_t* v_tile = row_of(p.v_bf16, p.v_strides, b, hk, k0);

  for (std::int64_t c = 0; c < keys; c += 2) {
    interleave_bf16_rows(k_tile + c * p.k_strides.seq,
                         c + 1 < keys ? k_tile + (c + 1) * p.k_strides.seq : nullptr, d, dp,
                         s.k_words + c / 2 * dp);
  }
  std::memset(s.dk, 0, sizeof(float) * std::size_t(keys * dp));
  std::memset(s.dv, 0, sizeof(float) * std::size_t(keys * dp));

  for (std::int64_t h = hk * group; h < (hk + 1) * group; ++h) {
    const std::int64_t bh = b * p.heads + h;
    const float* lse_head = p.lse + bh * p.q_len;
    const float* delta_head = shared.delta + bh * p.q_len;
    const std::uint32_t* q_words = shared.q_words + bh * d_pairs * tq_pad;
    const std::uint32_t* do_words = shared.do_words + bh * d_pairs * tq_pad;
    const std::uint32_t* q_rows = shared.q_rows + bh * (tq_pad / 2) * dp;
    const std::uint32_t* do_rows = shared.do_rows + bh * (tq_pad / 2) * dp;
    float* dq_head = dq_acc + bh * p.q_len * dp;
    for (std::int64_t q0 = q_begin; q0 < q_end; q0 += kQueryTile) {
      const std::int64_t rows = min64(kQueryTile, q_end - q0), cols = round_up16(rows);
      for (std::int64_t r = 0; r < cols; ++r) {
        // Padding rows and fully masked rows (lse = -inf) get lse = +inf, hence P = 0.
        const bool live = r < rows && lse_head[q0 + r] != -kInf;
        s.row_lse[r] = live ? lse_head[q0 + r] : kInf;
        s.row_delta[r] = live ? delta_head[q0 + r] : 0.0f;
      }
      // S^T = scale * K Q^T (scaled in f32, masked); dP^T = V dO^T.
      bf16_gemm(keys, cols, d_pairs, k_tile, p.k_strides.seq, 2, q_words + q0, tq_pad, s.p_t,
                kQueryTile, p.scale, false);
      if (p.alibi_slopes != nullptr ||
          tile_has_hidden(p, WindowSides::flash, keys, k0, q0, offset, cols)) {
        bias_and_mask(p, WindowSides::flash, h, s.p_t, keys, k0, q0, offset, cols);
      }
      bf16_gemm(keys, cols, d_pairs, v_tile, p.v_strides.seq, 2, do_words + q0, tq_pad, s.ds_t,
                kQueryTile, 1.0f, false);
      // P = exp(S - lse), dS = P (dP - delta) in f32, written only as the bf16 operands of
      // the three products below: P^T and dS^T rows, and dS^T as pairs of keys.
      for (std::int64_t r = 0; r < cols; r += kLanes) {
        const vf lse_r = loadv(s.row_lse + r), delta_r = loadv(s.row_delta + r);
        std::int64_t c = 0;
        for (; c + 1 < keys; c += 2) {  // whole pairs: each pair rounded once, three stores
          const vf prob0 = expv(loadv(s.p_t + c * kQueryTile + r) - lse_r);
          const vf prob1 = expv(loadv(s.p_t + (c + 1) * kQueryTile + r) - lse_r);
          const vf ds0 = prob0 * (loadv(s.ds_t + c * kQueryTile + r) - delta_r);
          const vf ds1 = prob1 * (loadv(s.ds_t + (c + 1) * kQueryTile + r) - delta_r);
          const __m512i p_halves = bf16_halves(prob0, prob1), ds_halves = bf16_halves(ds0, ds1);
          store_halves(s.p_bf16 + c * kQueryTile + r, s.p_bf16 + (c + 1) * kQueryTile + r,
                       p_halves);
          store_halves(s.ds_bf16 + c * kQueryTile + r, s.ds_bf16 + (c + 1) * kQueryTile + r,
                       ds_halves);
          _mm512_storeu_si512(s.ds_words + c / 2 * kQueryTile + r, pair_words(ds_halves));
        }
        if (c < keys) {  // an odd last key pairs with zero
          const vf prob = expv(loadv(s.p_t + c * kQueryTile + r) - lse_r);
          const vf ds = prob * (loadv(s.ds_t + c * kQueryTile + r) - delta_r);
          store_bf16(s.p_bf16 + c * kQueryTile + r, prob);
          store_bf16(s.ds_bf16 + c * kQueryTile + r, ds);
          store_pair_words(s.ds_words + c / 2 * kQueryTile + r, ds, vf{});
        }
      }
      // dV += P^T dO; dK += dS^T Q (scale at the end): depth = query pairs from q0 (even).
      const std::int64_t query_pairs = (rows + 1) / 2;
      bf16_gemm(keys, dp, query_pairs, s.p_bf16, kQueryTile, 2, do_rows + q0 / 2 * dp, dp, s.dv,
                dp, 1.0f, true);
      bf16_gemm(keys, dp, query_pairs, s.ds_bf16, kQueryTile, 2, q_rows + q0 / 2 * dp, dp, s.dk,
                dp, 1.0f, true);
      // dQ_acc[rows][dp] += dS K: A = dS^T pairs of keys, B = K pairs of keys.
      bf16_gemm(rows, dp, key_pairs, reinterpret_cast<const std::uint16_t*>(s.ds_words), 2,
                2 * kQueryTile, s.k_words, dp, dq_head + q0 * dp, dp, 1.0f, true);
    }
  }
  for (std::int64_t c = 0; c < keys; ++c) {
    float* dk = row_of(p.dk, p.dk_strides, b, hk, k0 + c);
    float* dv = row_of(p.dv, p.dv_strides, b, hk, k0 + c);
    for (std::int64_t x = 0; x < d; ++x) {
      dk[x] = p.scale * s.dk[c * dp + x];
      dv[x] = s.dv[c * dp + x];
    }
  }
}

#undef PB_INLINE

}  // namespace

std::size_t workspace_bytes(const AttentionParams& p, AttentionPass pass) {
  return std::size_t(shared_bytes(p, pass) + thread_count(p) * per_thread_bytes(p, pass));
}

void forward(const AttentionParams& p) {
  const int threads = thread_count(p);
  const std::int64_t per_thread = per_thread_bytes(p, AttentionPass::forward);
  const std::int64_t shared_size = shared_bytes(p, AttentionPass::forward);
  unsigned char* workspace = static_cast<unsigned char*>(p.workspace);
  Carver shared_carver(workspace);
  std::uint32_t* v_pairs = carve_v_pairs(shared_carver, p);
  const std::int64_t query_tiles = (p.q_len + kQueryTile - 1) / kQueryTile;
  const std::int64_t tasks = p.batch * p.heads * query_tiles;
#pragma omp parallel num_threads(threads) if (worth_threads(p))
  {
    Carver carver(workspace + shared_size + omp_get_thread_num() * per_thread);
    const ForwardScratch scratch = carve_forward(carver, p.head_dim);
    fill_v_pairs(p, v_pairs);  // ends with a barrier
#pragma omp for schedule(dynamic, 1)
    for (std::int64_t task = 0; task < tasks; ++task) {
      const std::int64_t bh = task / query_tiles;
      const std::int64_t tile = query_tiles - 1 - task % query_tiles;  // heaviest first
      const std::int64_t q0 = tile * kQueryTile;
      const std::int64_t rows = min64(kQueryTile, p.q_len - q0);
      forward_query_tile(p, bh / p.heads, bh % p.heads, q0, rows, v_pairs, scratch);
    }
  }
}

void backward(const AttentionParams& p) {
  const int threads = thread_count(p);
  const std::int64_t per_thread = per_thread_bytes(p, AttentionPass::backward);
  const std::int64_t shared_size = shared_bytes(p, AttentionPass::backward);
  unsigned char* workspace = static_cast<unsigned char*>(p.workspace);
  Carver shared_carver(workspace);
  const Shared shared = carve_shared(shared_carver, p);
  const std::int64_t key_tiles = (p.kv_len + kKeyTile - 1) / kKeyTile;
  const std::int64_t tasks = p.batch * p.kv_heads * key_tiles;
  const std::int64_t dq_offset = per_thread - (dq_acc_floats(p) * 4 + 63) / 64 * 64;
#pragma omp parallel num_threads(threads) if (worth_threads(p))
  {
    unsigned char* mine = workspace + shared_size + omp_get_thread_num() * per_thread;
    Carver carver(mine);
    const BackwardScratch scratch = carve_backward(carver, p.head_dim);
    float* dq_acc = reinterpret_cast<float*>(mine + dq_offset);
    const int team = omp_get_num_threads();
    std::memset(dq_acc, 0, sizeof(float) * std::size_t(dq_acc_floats(p)));
    fill_shared(p, shared);  // ends with a barrier
    // Fixed round robin, zigzag per (batch, kv head), as the f32 kernel: bit-reproducible.
#pragma omp for schedule(static, 1)
    for (std::int64_t task = 0; task < tasks; ++task) {
      const std::int64_t bhk = task / key_tiles, step = task % key_tiles;
      const std::int64_t tile = bhk % 2 == 0 ? step : key_tiles - 1 - step;
      const std::int64_t k0 = tile * kKeyTile;
      const std::int64_t keys = min64(kKeyTile, p.kv_len - k0);
      backward_key_tile(p, bhk / p.kv_heads, bhk % p.kv_heads, k0, keys, shared, dq_acc, scratch);
    }  // implicit barrier: every accumulator complete
    flash_tiles::reduce_dq(p, reinterpret_cast<const float*>(workspace + shared_size + dq_offset),
                           per_thread / 4, team);
  }
}

}  // namespace patchbay::kernels::flash_bf16
