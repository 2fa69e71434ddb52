// Block-sparse attention kernel (see include/patchbay/kernels/block_sparse_attention.hpp).
// Forward: one task per (batch, head, query block); for each active key block of that row of
// the layout, each query row updates its online softmax over the keys it sees. Within an
// active tile the visible keys of one row form one contiguous range (causal and window cut
// a range; the layout is uniform over the tile), so no per-element mask is evaluated.
// Backward: one task per (batch, kv head) so that dk/dv of a kv head have one writer; it
// walks the same tiles for every query head of the group and recomputes P from lse.
// The two row routines are compiled per ISA with GCC target_clones (picked at load time).
#include "patchbay/kernels/block_sparse_attention.hpp"

#include <omp.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>

#if defined(__GNUC__) && !defined(__clang__) && defined(__x86_64__)
#define PB_BLOCK_SPARSE_CLONES \
  __attribute__((target_clones("arch=skylake-avx512", "arch=haswell", "default")))
#else
#define PB_BLOCK_SPARSE_CLONES
#endif

namespace patchbay::kernels {
namespace {

constexpr float kNegInf = -std::numeric_limits<float>::infinity();

// One query row against n consecutive keys of one block: online-softmax update of (m, l, o[D]).
// kt: the block's keys transposed, [D][bs], starting at the first key (column) to use; the
// score loop runs over keys (independent lanes), so it vectorises without reassociating sums.
PB_BLOCK_SPARSE_CLONES
void forward_row(const float* q, const float* kt, const float* v, std::int64_t n,
                 std::int64_t dim, std::int64_t bs, float scale, float* s, float& m, float& l,
                 float* o) {
  for (std::int64_t j = 0; j < n; ++j) s[j] = 0.f;
  for (std::int64_t d = 0; d < dim; ++d) {
    const float qd = q[d] * scale;
    const float* row = kt + d * bs;
    for (std::int64_t j = 0; j < n; ++j) s[j] += qd * row[j];
  }
  float row_max = kNegInf;
  for (std::int64_t j = 0; j < n; ++j) row_max = std::max(row_max, s[j]);
  const float m_new = std::max(m, row_max);
  const float alpha = m == kNegInf ? 0.f : std::exp(m - m_new);
  if (alpha != 1.f) {
    for (std::int64_t d = 0; d < dim; ++d) o[d] *= alpha;
    l *= alpha;
  }
  for (std::int64_t j = 0; j < n; ++j) {
    const float p = std::exp(s[j] - m_new);
    l += p;
    const float* vj = v + j * dim;
    for (std::int64_t d = 0; d < dim; ++d) o[d] += p * vj[d];
  }
  m = m_new;
}

// One query row against n consecutive keys of one block: adds its share of dq (scaled), dk,
// dv. kt, vt: the block's keys and values transposed ([D][bs], from the first key used).
PB_BLOCK_SPARSE_CLONES
void backward_row(const float* q, const float* dout, const float* kt, const float* vt,
                  const float* k, std::int64_t n, std::int64_t dim, std::int64_t bs, float scale,
                  float lse, float delta, float* s, float* dp, float* dq, float* dk, float* dv) {
  for (std::int64_t j = 0; j < n; ++j) s[j] = dp[j] = 0.f;
  for (std::int64_t d = 0; d < dim; ++d) {
    const float qd = q[d] * scale, gd = dout[d];
    const float* krow = kt + d * bs;
    const float* vrow = vt + d * bs;
    for (std::int64_t j = 0; j < n; ++j) {
      s[j] += qd * krow[j];
      dp[j] += gd * vrow[j];
    }
  }
  for (std::int64_t j = 0; j < n; ++j) {
    const float p = std::exp(s[j] - lse);
    const float ds = p * (dp[j] - delta) * scale;
    const float* kj = k + j * dim;
    float* dkj = dk + j * dim;
    float* dvj = dv + j * dim;
    for (std::int64_t d = 0; d < dim; ++d) {
      dvj[d] += p * dout[d];
      dq[d] += ds * kj[d];
      dkj[d] += ds * q[d];
    }
  }
}

// x [B, Hkv, Tk, D] -> blocks transposed [B, Hkv, nb, D, bs] (zero padded past Tk).
std::vector<float> transpose_blocks(const float* x, std::int64_t rows, std::int64_t kv_len,
                                    std::int64_t dim, std::int64_t bs, int threads) {
  const std::int64_t nb = (kv_len + bs - 1) / bs;
  std::vector<float> out(static_cast<size_t>(rows * nb * dim * bs), 0.f);
#pragma omp parallel for num_threads(threads) if (threads > 1)
  for (std::int64_t rb = 0; rb < rows * nb; ++rb) {
    const std::int64_t r = rb / nb, c = rb % nb;
    float* dst = out.data() + rb * dim * bs;
    for (std::int64_t j = 0; j < bs && c * bs + j < kv_len; ++j) {
      const float* src = x + (r * kv_len + c * bs + j) * dim;
      for (std::int64_t d = 0; d < dim; ++d) dst[d * bs + j] = src[d];
    }
  }
  return out;
}

// Threads for a call: small calls (under 2^20 multiply-adds if every tile were active) stay on
// the calling thread, where an OpenMP region costs more than it saves.
int thread_count(const BlockSparseParams& p) {
  const double work = double(p.batch) * p.heads * p.q_len * p.kv_len * p.head_dim;
  if (work < double(1 << 20)) return 1;
  return p.num_threads > 0 ? p.num_threads : omp_get_max_threads();
}

// Keys [lo, hi) of key block c visible to absolute query position a (layout already checked).
void visible_range(const BlockSparseParams& p, std::int64_t a, std::int64_t c, std::int64_t& lo,
                   std::int64_t& hi) {
  lo = c * p.block_size;
  hi = std::min(lo + p.block_size, p.kv_len);
  if (p.causal) hi = std::min(hi, a + 1);
  if (p.window > 0) lo = std::max(lo, a - p.window + 1);
}

}  // namespace

std::int64_t block_sparse_layout_blocks(std::int64_t kv_len, std::int64_t block_size) {
  return block_size > 0 ? (kv_len + block_size - 1) / block_size : 0;
}

std::string block_sparse_params_error(const BlockSparseParams& p, bool backward) {
  if (p.batch < 1 || p.heads < 1 || p.kv_heads < 1 || p.q_len < 1 || p.kv_len < 1 || p.head_dim < 1)
    return "batch, heads, kv_heads, q_len, kv_len and head_dim must all be >= 1";
  if (p.heads % p.kv_heads != 0)
    return "heads (" + std::to_string(p.heads) + ") must be a multiple of kv_heads (" +
           std::to_string(p.kv_heads) + ")";
  if (p.q_len > p.kv_len)
    return "a block layout needs q_len <= kv_len (queries are the last q_len positions), found " +
           std::to_string(p.q_len) + " > " + std::to_string(p.kv_len);
  if (p.block_size < 1) return "block_size must be >= 1, found " + std::to_string(p.block_size);
  if (!std::isfinite(p.scale)) return "scale must be finite";
  if (!p.q || !p.k || !p.v || !p.out || !p.lse || !p.layout) return "a forward pointer is null";
  if (backward && (!p.dout || !p.dq || !p.dk || !p.dv)) return "a backward pointer is null";
  return {};
}

std::string block_sparse_attention_forward(const BlockSparseParams& p) {
  if (std::string err = block_sparse_params_error(p, false); !err.empty()) return err;
  const std::int64_t blocks = block_sparse_layout_blocks(p.kv_len, p.block_size);
  const std::int64_t offset = p.kv_len - p.q_len, dim = p.head_dim, bs = p.block_size;
  const std::int64_t group = p.heads / p.kv_heads;
  const std::int64_t first_row = offset / bs;  // layout rows holding queries
  const std::int64_t rows = blocks - first_row;
  const std::int64_t tasks = p.batch * p.heads * rows;
  const std::vector<float> kt =
      transpose_blocks(p.k, p.batch * p.kv_heads, p.kv_len, dim, bs, thread_count(p));
#pragma omp parallel num_threads(thread_count(p)) if (tasks > 1 && thread_count(p) > 1)
  {
    std::vector<float> s(static_cast<size_t>(bs));
#pragma omp for schedule(dynamic, 1)
    for (std::int64_t task = 0; task < tasks; ++task) {
      const std::int64_t b = task / (p.heads * rows), h = (task / rows) % p.heads;
      const std::int64_t r = first_row + task % rows, hk = h / group;
      const std::int64_t i0 = std::max<std::int64_t>(r * bs - offset, 0);
      const std::int64_t i1 = std::min((r + 1) * bs - offset, p.q_len);
      const float* ktbase = kt.data() + (b * p.kv_heads + hk) * blocks * dim * bs;
      const float* vbase = p.v + (b * p.kv_heads + hk) * p.kv_len * dim;
      const std::int32_t* layout_row = p.layout + (h * blocks + r) * blocks;
      for (std::int64_t i = i0; i < i1; ++i) {
        const std::int64_t row = (b * p.heads + h) * p.q_len + i, a = i + offset;
        const float* q = p.q + row * dim;
        float* o = p.out + row * dim;
        std::fill(o, o + dim, 0.f);
        float m = kNegInf, l = 0.f;
        for (std::int64_t c = 0; c < blocks; ++c) {
          if (layout_row[c] == 0) continue;
          std::int64_t lo, hi;
          visible_range(p, a, c, lo, hi);
          if (lo >= hi) continue;
          forward_row(q, ktbase + c * dim * bs + (lo - c * bs), vbase + lo * dim, hi - lo, dim, bs,
                      p.scale, s.data(), m, l, o);
        }
        if (l > 0.f) {
          const float inv = 1.f / l;
          for (std::int64_t d = 0; d < dim; ++d) o[d] *= inv;
          p.lse[row] = m + std::log(l);
        } else {
          p.lse[row] = kNegInf;
        }
      }
    }
  }
  return {};
}

std::string block_sparse_attention_backward(const BlockSparseParams& p) {
  if (std::string err = block_sparse_params_error(p, true); !err.empty()) return err;
  const std::int64_t blocks = block_sparse_layout_blocks(p.kv_len, p.block_size);
  const std::int64_t offset = p.kv_len - p.q_len, dim = p.head_dim, bs = p.block_size;
  const std::int64_t group = p.heads / p.kv_heads;
  const std::int64_t first_row = offset / bs;
  std::fill(p.dq, p.dq + p.batch * p.heads * p.q_len * dim, 0.f);
  std::fill(p.dk, p.dk + p.batch * p.kv_heads * p.kv_len * dim, 0.f);
  std::fill(p.dv, p.dv + p.batch * p.kv_heads * p.kv_len * dim, 0.f);
  const std::int64_t tasks = p.batch * p.kv_heads;
  const std::vector<float> kt =
      transpose_blocks(p.k, p.batch * p.kv_heads, p.kv_len, dim, bs, thread_count(p));
  const std::vector<float> vt =
      transpose_blocks(p.v, p.batch * p.kv_heads, p.kv_len, dim, bs, thread_count(p));
#pragma omp parallel for num_threads(thread_count(p)) \
    schedule(dynamic, 1) if (tasks > 1 && thread_count(p) > 1)
  for (std::int64_t task = 0; task < tasks; ++task) {
    const std::int64_t b = task / p.kv_heads, hk = task % p.kv_heads;
    const std::int64_t kv_off = (b * p.kv_heads + hk) * p.kv_len * dim;
    const std::int64_t t_off = (b * p.kv_heads + hk) * blocks * dim * bs;
    std::vector<float> s(static_cast<size_t>(bs)), dp(static_cast<size_t>(bs));
    for (std::int64_t h = hk * group; h < (hk + 1) * group; ++h) {
      for (std::int64_t r = first_row; r < blocks; ++r) {
        const std::int32_t* layout_row = p.layout + (h * blocks + r) * blocks;
        const std::int64_t i0 = std::max<std::int64_t>(r * bs - offset, 0);
        const std::int64_t i1 = std::min((r + 1) * bs - offset, p.q_len);
        for (std::int64_t i = i0; i < i1; ++i) {
          const std::int64_t row = (b * p.heads + h) * p.q_len + i, a = i + offset;
          const float lse = p.lse[row];
          if (lse == kNegInf) continue;
          const float* dout = p.dout + row * dim;
          const float* o = p.out + row * dim;
          float delta = 0.f;
          for (std::int64_t d = 0; d < dim; ++d) delta += dout[d] * o[d];
          for (std::int64_t c = 0; c < blocks; ++c) {
            if (layout_row[c] == 0) continue;
            std::int64_t lo, hi;
            visible_range(p, a, c, lo, hi);
            if (lo >= hi) continue;
            const std::int64_t col = t_off + c * dim * bs + (lo - c * bs);
            backward_row(p.q + row * dim, dout, kt.data() + col, vt.data() + col,
                         p.k + kv_off + lo * dim, hi - lo, dim, bs, p.scale, lse, delta, s.data(),
                         dp.data(), p.dq + row * dim, p.dk + kv_off + lo * dim,
                         p.dv + kv_off + lo * dim);
          }
        }
      }
    }
  }
  return {};
}

}  // namespace patchbay::kernels
