// The per-element arithmetic of the bf16 tensor-core flash attention (attention_bf16.hpp),
// written once for the CUDA kernels and their CPU twin (attention_bf16_reference.hpp), so the
// twin follows the kernels' tiling, masking, online softmax and rounding points exactly; only
// the order of the f32 sums inside one tensor-core product differs.
//
// Tiling (both): blocks of kFlashRows = 64 query (or key) rows, the other side streamed in
// tiles of kFlashTile = 64 rows; in the kernels each warp owns 16 of the block's rows.
// Rounding points (the CPU bf16 kernel's, attention_flash_bf16.cpp): q, k, v and dout are bf16;
// scores S = q . k are f32 sums of bf16 products, scaled in f32; the running max, running sum
// (of the unrounded f32 probabilities), lse, delta = rowsum(dout * out) and every accumulator
// are f32; P (forward and backward) and dS = P (dP - delta) are rounded to bf16 only as the
// A operand of the next product; dQ and dK take the scale at the end.
#pragma once

#include <cmath>
#include <cstdint>

#include "patchbay/kernels/cuda/math/bf16.hpp"
#include "patchbay/kernels/cuda/math/host_device.hpp"

namespace patchbay::kernels::cuda::math {

constexpr int kFlashRows = 64;  // query rows per forward / dQ block, key rows per dK/dV block
constexpr int kFlashTile = 64;  // rows of the streamed operand per step
constexpr int kFlashWarpRows = 16;

// Whether query `query` sees key `key`: causal, inside the query's segment (first_key = its
// segment's first position, 0 without segments; keys of the query's segment never lie past
// the query under causality) and a real row (key < steps).
PATCHBAY_HD bool flash_visible(int64_t query, int64_t key, int64_t first_key, int64_t steps) {
  return key <= query && key >= first_key && key < steps;
}

// The dK/dV kernels' mirror: key `key` is seen by query `query` when query >= key, the query
// lies before query_end (one past its segment's last position; steps without segments) and
// is a real row.
PATCHBAY_HD bool flash_visible_from_key(int64_t key, int64_t query, int64_t query_end,
                                        int64_t steps) {
  return query >= key && query < query_end && query < steps;
}

// One row's online-softmax step over a tile whose largest visible scaled score is tile_max
// (-inf when the tile has none for this row): the new running max and the factor by which
// the running sum and output accumulator are rescaled (1 when nothing changes, 0 on the first
// visible tile, where both are still 0).
struct FlashStep {
  float max;
  float correction;
};
PATCHBAY_HD FlashStep flash_online_step(float running_max, float tile_max) {
  const float new_max = running_max > tile_max ? running_max : tile_max;
  if (new_max == -INFINITY) return {new_max, 1.0f};  // nothing visible yet
  return {new_max, expf(running_max - new_max)};     // exp(-inf) = 0 on the first tile
}

// The unrounded probability of a visible scaled score under the running max (0 when masked).
PATCHBAY_HD float flash_probability(float scaled_score, float max, bool visible) {
  return visible ? expf(scaled_score - max) : 0.0f;
}

// The backward's recomputed probability exp(s - lse) of a visible scaled score (0 masked).
PATCHBAY_HD float flash_backward_probability(float scaled_score, float lse, bool visible) {
  return visible ? expf(scaled_score - lse) : 0.0f;
}

// dS before the scale: P (dP - delta), with P the unrounded probability.
PATCHBAY_HD float flash_score_gradient(float p, float dp, float delta) { return p * (dp - delta); }

// The value a P or dS element takes as a product operand: rounded through bf16.
PATCHBAY_HD float flash_operand(float value) { return round_through_bf16(value); }

// lse of a finished row: max + log(sum) (the forward keeps the sum of unrounded P).
PATCHBAY_HD float flash_lse(float max, float sum) { return max + logf(sum); }

}  // namespace patchbay::kernels::cuda::math
