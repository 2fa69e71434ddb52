// CPU twin of the bf16 tensor-core flash attention (attention_bf16_reference.hpp). Each
// function walks one row (a query for the forward and dQ, a key for dK/dV) through the tiles
// its kernel's block visits, in the kernel's order, with math/flash_bf16.hpp's arithmetic:
// tiles of 64 aligned to 64 (rows past T read as zeros and are masked), the online-softmax
// step once per tile, the row sum of unrounded P over even and odd columns apart, as the
// kernel's lane pairs sum it, P and dS rounded to bf16 as product operands, dQ and dK scaled at the
// end.
#include "patchbay/kernels/cuda/attention_bf16_reference.hpp"

#include <algorithm>
#include <cmath>
#include <vector>

#include "patchbay/kernels/cuda/math/bf16.hpp"
#include "patchbay/kernels/cuda/math/flash_bf16.hpp"
#include "patchbay/kernels/cuda/math/segments.hpp"

namespace patchbay::kernels::cuda {
namespace {

namespace m = math;
constexpr int64_t kRows = m::kFlashRows, kTile = m::kFlashTile;

// One head's [T][D] bf16 matrix as floats (exact).
std::vector<float> widen(const uint16_t* x, int64_t count) {
  std::vector<float> out(static_cast<size_t>(count));
  for (int64_t i = 0; i < count; ++i) out[size_t(i)] = m::float_from_bf16(x[i]);
  return out;
}

// f32 dot product of two rows (bf16 values: each product exact in f32), in index order.
float dot(const float* a, const float* b, int64_t dim) {
  float sum = 0.0f;
  for (int64_t d = 0; d < dim; ++d) sum += a[d] * b[d];
  return sum;
}

// The kernels' view of one head: rows past T are zeros.
struct Head {
  const float* q;
  const float* k;
  const float* v;
  int64_t steps, dim;
  const float* row(const float* x, int64_t r, const std::vector<float>& zeros) const {
    return r < steps ? x + r * dim : zeros.data();
  }
};

// The tiles a query block visits: [tile_begin, last_row] (forward and dQ kernels).
struct QueryBlockTiles {
  int64_t tile_begin, last_row;
};
QueryBlockTiles query_block_tiles(const int32_t* seg, int64_t query, int64_t steps) {
  const int64_t first_row = query / kRows * kRows;
  const int64_t begin = seg != nullptr ? m::segment_begin(seg, first_row) / kTile * kTile : 0;
  return {begin, std::min(first_row + kRows, steps) - 1};
}

void forward_row(const Head& h, const int32_t* seg, int64_t query, float scale, float* out_row,
                 float* lse_row) {
  const std::vector<float> zeros(size_t(h.dim), 0.0f);
  const int64_t first_key = seg != nullptr ? m::segment_begin(seg, query) : 0;
  const QueryBlockTiles tiles = query_block_tiles(seg, query, h.steps);
  std::vector<float> acc(size_t(h.dim), 0.0f), scores(static_cast<size_t>(kTile));
  float running_max = -INFINITY, running_sum = 0.0f;
  const float* q_row = h.q + query * h.dim;
  for (int64_t key0 = tiles.tile_begin; key0 <= tiles.last_row; key0 += kTile) {
    float tile_max = -INFINITY;
    for (int64_t c = 0; c < kTile; ++c) {
      const int64_t key = key0 + c;
      const float s = dot(q_row, h.row(h.k, key, zeros), h.dim);
      scores[size_t(c)] = m::flash_visible(query, key, first_key, h.steps) ? s * scale : -INFINITY;
      tile_max = std::max(tile_max, scores[size_t(c)]);
    }
    const m::FlashStep step = m::flash_online_step(running_max, tile_max);
    float parity_sums[2] = {0.0f, 0.0f};  // even, odd columns
    for (float& a : acc) a *= step.correction;
    for (int64_t c = 0; c < kTile; ++c) {
      const int64_t key = key0 + c;
      const float p = m::flash_probability(scores[size_t(c)], step.max,
                                           m::flash_visible(query, key, first_key, h.steps));
      parity_sums[c % 2] += p;  // the kernel's two lanes per row take alternate columns
      const float p_operand = m::flash_operand(p);
      const float* v_row = h.row(h.v, key, zeros);
      for (int64_t d = 0; d < h.dim; ++d) acc[size_t(d)] += p_operand * v_row[d];
    }
    running_sum = running_sum * step.correction + (parity_sums[0] + parity_sums[1]);
    running_max = step.max;
  }
  const float inverse_sum = 1.0f / running_sum;
  for (int64_t d = 0; d < h.dim; ++d) out_row[d] = acc[size_t(d)] * inverse_sum;
  *lse_row = m::flash_lse(running_max, running_sum);
}

// dq_row (scaled) of one query: the dQ kernel's key tiles.
void dq_row(const Head& h, const float* dout_h, const int32_t* seg, int64_t query, float scale,
            float row_lse, float row_delta, float* dq_out) {
  const std::vector<float> zeros(size_t(h.dim), 0.0f);
  const int64_t first_key = seg != nullptr ? m::segment_begin(seg, query) : 0;
  const QueryBlockTiles tiles = query_block_tiles(seg, query, h.steps);
  std::vector<float> acc(size_t(h.dim), 0.0f);
  const float* q_row = h.q + query * h.dim;
  const float* do_row = dout_h + query * h.dim;
  for (int64_t key0 = tiles.tile_begin; key0 <= tiles.last_row; key0 += kTile)
    for (int64_t c = 0; c < kTile; ++c) {
      const int64_t key = key0 + c;
      const float* k_row = h.row(h.k, key, zeros);
      const bool visible = m::flash_visible(query, key, first_key, h.steps);
      const float p =
          m::flash_backward_probability(dot(q_row, k_row, h.dim) * scale, row_lse, visible);
      const float dp = dot(do_row, h.row(h.v, key, zeros), h.dim);
      const float ds = m::flash_operand(m::flash_score_gradient(p, dp, row_delta));
      for (int64_t d = 0; d < h.dim; ++d) acc[size_t(d)] += ds * k_row[d];
    }
  for (int64_t d = 0; d < h.dim; ++d) dq_out[d] = acc[size_t(d)] * scale;
}

// dk_row (scaled) and dv_row of one key: the dK/dV kernel's query tiles.
void dkdv_row(const Head& h, const float* dout_h, const float* lse_h, const float* delta_h,
              const int32_t* seg, int64_t key, float scale, float* dk_out, float* dv_out) {
  const std::vector<float> zeros(size_t(h.dim), 0.0f);
  const int64_t first_key = key / kRows * kRows;
  const int64_t last_key = std::min(first_key + kRows, h.steps) - 1;
  const int64_t query_end = seg != nullptr ? m::segment_end(seg, h.steps, key) : h.steps;
  const int64_t block_query_end = seg != nullptr ? m::segment_end(seg, h.steps, last_key) : h.steps;
  std::vector<float> dk_acc(size_t(h.dim), 0.0f), dv_acc(size_t(h.dim), 0.0f);
  const float* k_row = h.k + key * h.dim;
  const float* v_row = h.v + key * h.dim;
  for (int64_t query0 = first_key; query0 < block_query_end; query0 += kTile)
    for (int64_t c = 0; c < kTile; ++c) {
      const int64_t query = query0 + c;
      const bool real = query < h.steps;
      const float* q_row = h.row(h.q, query, zeros);
      const float* do_row = real ? dout_h + query * h.dim : zeros.data();
      const bool visible = m::flash_visible_from_key(key, query, query_end, h.steps);
      const float p = m::flash_backward_probability(dot(k_row, q_row, h.dim) * scale,
                                                    real ? lse_h[query] : 0.0f, visible);
      const float dp = dot(v_row, do_row, h.dim);
      const float ds =
          m::flash_operand(m::flash_score_gradient(p, dp, real ? delta_h[query] : 0.0f));
      const float p_operand = m::flash_operand(p);
      for (int64_t d = 0; d < h.dim; ++d) {
        dv_acc[size_t(d)] += p_operand * do_row[d];
        dk_acc[size_t(d)] += ds * q_row[d];
      }
    }
  for (int64_t d = 0; d < h.dim; ++d) {
    dk_out[d] = dk_acc[size_t(d)] * scale;
    dv_out[d] = dv_acc[size_t(d)];
  }
}

}  // namespace

void causal_attention_bf16_forward_twin(const uint16_t* q, const uint16_t* k, const uint16_t* v,
                                        float* out, float* lse, int64_t batch_heads, int64_t steps,
                                        int64_t head_dim, float scale, const int32_t* segments,
                                        int64_t heads) {
  const int64_t n = steps * head_dim;
  for (int64_t bh = 0; bh < batch_heads; ++bh) {
    const std::vector<float> qh = widen(q + bh * n, n), kh = widen(k + bh * n, n),
                             vh = widen(v + bh * n, n);
    const Head h{qh.data(), kh.data(), vh.data(), steps, head_dim};
    const int32_t* seg = segments != nullptr ? segments + (bh / heads) * steps : nullptr;
    for (int64_t i = 0; i < steps; ++i)
      forward_row(h, seg, i, scale, out + bh * n + i * head_dim, lse + bh * steps + i);
  }
}

void causal_attention_bf16_backward_twin(const uint16_t* q, const uint16_t* k, const uint16_t* v,
                                         const float* out, const uint16_t* dout, const float* lse,
                                         float* dq, float* dk, float* dv, int64_t batch_heads,
                                         int64_t steps, int64_t head_dim, float scale,
                                         const int32_t* segments, int64_t heads) {
  const int64_t n = steps * head_dim;
  for (int64_t bh = 0; bh < batch_heads; ++bh) {
    const std::vector<float> qh = widen(q + bh * n, n), kh = widen(k + bh * n, n),
                             vh = widen(v + bh * n, n), doh = widen(dout + bh * n, n);
    const Head h{qh.data(), kh.data(), vh.data(), steps, head_dim};
    const int32_t* seg = segments != nullptr ? segments + (bh / heads) * steps : nullptr;
    const float* lse_h = lse + bh * steps;
    std::vector<float> delta(static_cast<size_t>(steps));
    for (int64_t i = 0; i < steps; ++i)  // delta = rowsum(dout * out), f32
      delta[size_t(i)] = dot(out + bh * n + i * head_dim, doh.data() + i * head_dim, head_dim);
    for (int64_t i = 0; i < steps; ++i) {
      dq_row(h, doh.data(), seg, i, scale, lse_h[i], delta[size_t(i)], dq + bh * n + i * head_dim);
      dkdv_row(h, doh.data(), lse_h, delta.data(), seg, i, scale, dk + bh * n + i * head_dim,
               dv + bh * n + i * head_dim);
    }
  }
}

}  // namespace patchbay::kernels::cuda
