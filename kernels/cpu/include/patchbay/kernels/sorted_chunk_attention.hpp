// Sorted-chunk attention: the attention core of Reformer LSH attention (Kitaev et al. 2020) as
// one fused kernel, with a plain reference beside it for tests.
//
// Each of `rows` independent sequences (batch x heads) has q, k, v [T, D] in position order and
// a slot plan of S slots (S a multiple of the chunk length c):
//   slot_position [S]  the position a slot reads (-1: padding),
//   slot_group    [S]  its group (for LSH: round * n_buckets + bucket; ignored on padding).
// Every position occurs equally often, `rounds` times; its r-th occurrence (in slot order)
// belongs to round r. Slots are cut into chunks of c; the queries of chunk n attend to the key
// slots of chunk n and, when its first slot has the same group, of chunk n - 1, keeping a key
// slot u for the query slot s only when
//   position(u) >= 0, group(u) == group(s), and (causal) position(u) <= position(s).
// Score of the pair (query position i, key position j):
//   scale * q_i . k_j  + self_bias                     when j == i
//                      - log(count(i, j)) if dedup     otherwise
// count(i, j) = the rounds r whose window holds the pair: the r-th occurrences of i and j share
// a group and j's chunk is i's chunk or the one before (with c-slot chunks of one group, that
// is "own or previous chunk of the same bucket").
// Each query slot takes a softmax over its window: (o_s, lse_s). The occurrences of one
// position combine by their log-sum-exp, out_i = sum_s softmax(lse_s) o_s, lse_i =
// logsumexp_s lse_s: one softmax over the union of the rounds' windows (with dedup, each pair
// counted once). A position with no occurrence gets out 0 and lse -inf.
//
// Kernel: per chunk, the query, key and value rows are read through the slot plan straight into
// the tile scratch (no gathered [S, D] copies), scores and P V run on the flash tiles' register
// micro GEMM (small_gemm.inc) and vector exp (attention_flash_tile_math.inc), masks and biases
// are computed in the tile, and the per-slot results are combined into out / lse as they are
// produced. The backward recomputes each chunk's probabilities from the combined lse (the
// combination is itself one softmax, so it is flash attention's backward with scattered rows):
// dS = P (dO V^T - delta), delta_i = dO_i . out_i; dq, dk, dv are added back by position.
// fp32 accumulation; AVX-512 / AVX2 / generic builds picked at run time or forced by `isa`.
// Time O(S c D) per row; memory O(T rounds) per row for the occurrence table, O(c (c + D)) of
// tile scratch per thread; nothing is S x S or T x T.
// Causality is bit-exact: out_i and lse_i read only positions <= i (masked entries are excluded
// before the max and are exact zeros in every sum), so later positions, and later changes to the
// plan that keep the earlier slots' windows, leave them unchanged bit for bit.
// The forward also writes stat [rows, T, 2] = (M_i, log sum exp(score - M_i)) over position i's
// pairs, M_i its largest score: lse_i = M_i + stat[1], kept in two parts because scores near the
// self bias (-1e5) sit where f32 steps are 1/128, and the backward needs exp(score - lse_i) to
// full precision. A position with no occurrence has (-inf, -inf).
// All float buffers contiguous row-major: q, k, v, out, dout, dq, dk, dv [rows, T, D];
// slot_position, slot_group int32 [rows, S]. Rows run in parallel (OpenMP); each row's backward
// adds into its own dq, dk, dv rows, which the call overwrites first.
// bf16 operands (shape.bf16, the engine's bf16 autocast), the recipe of the fused dense kernel
// under autocast (attention_flash.hpp's q_bf16): q, k, v and dout are rounded to bf16 as the
// tiles load them (the buffers stay f32; the score scale multiplies the rounded q in f32), the
// probabilities P are rounded for P V and dV = P^T dO and dS for dK and dQ, while the scores,
// the softmax statistics, delta = rounded dout . out and every accumulator stay f32; out, stat
// and the gradients are f32. Every code path runs it on bf16-exact f32 values (a product of two
// is exact in f32, so an f32 FMA is a bf16 x bf16 product with f32 accumulation). The
// references follow the same rounding points.
#pragma once

#include <cstdint>
#include <string>

#include "patchbay/kernels/attention_flash.hpp"  // KernelIsa

namespace patchbay::kernels {

struct SortedChunkAttentionShape {
  std::int64_t rows = 0;                 // batch x heads
  std::int64_t length = 0;               // T
  std::int64_t head_dim = 0;             // D
  std::int64_t slots = 0;                // S, a multiple of chunk_len
  std::int64_t chunk_len = 0;            // c
  float scale = 1.0f;                    // multiplies q . k
  float self_bias = 0.0f;                // added to the pair j == i (Reformer: -1e5)
  bool causal = true;                    // keys at positions > the query's are hidden
  bool dedup = false;                    // subtract log(count) (see above)
  KernelIsa isa = KernelIsa::automatic;  // a forced code path must be one the CPU runs
  bool bf16 = false;                     // bf16 operands, f32 accumulation (see above)
};

// Empty when the kernels accept `s` and the plan, else what was expected and found (shapes,
// a slot position out of range, positions occurring unequally often, an ISA the CPU lacks).
// The kernels throw std::invalid_argument with this text. slot_position / slot_group may be
// null to check the shape alone.
std::string sorted_chunk_attention_error(const SortedChunkAttentionShape& s,
                                         const std::int32_t* slot_position,
                                         const std::int32_t* slot_group);

// out [rows, T, D] and stat [rows, T, 2] from q, k, v and the plan.
void sorted_chunk_attention_forward(const SortedChunkAttentionShape& s, const float* q,
                                    const float* k, const float* v,
                                    const std::int32_t* slot_position,
                                    const std::int32_t* slot_group, float* out, float* stat);
// dq, dk, dv from dout, with out and stat of the forward.
void sorted_chunk_attention_backward(const SortedChunkAttentionShape& s, const float* q,
                                     const float* k, const float* v,
                                     const std::int32_t* slot_position,
                                     const std::int32_t* slot_group, const float* out,
                                     const float* stat, const float* dout, float* dq, float* dk,
                                     float* dv);

// Plain references: the definition above pair by pair, in double; lse [rows, T] whole.
void sorted_chunk_attention_reference_forward(const SortedChunkAttentionShape& s, const float* q,
                                              const float* k, const float* v,
                                              const std::int32_t* slot_position,
                                              const std::int32_t* slot_group, float* out,
                                              float* lse);
void sorted_chunk_attention_reference_backward(const SortedChunkAttentionShape& s, const float* q,
                                               const float* k, const float* v,
                                               const std::int32_t* slot_position,
                                               const std::int32_t* slot_group, const float* dout,
                                               float* dq, float* dk, float* dv);

}  // namespace patchbay::kernels
