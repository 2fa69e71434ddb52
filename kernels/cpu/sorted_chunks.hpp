// Private seam between the sorted-chunk attention driver (sorted_chunk_attention.cpp:
// validation, the per-row occurrence table and delta, OpenMP over rows, scratch) and its chunk
// kernels (sorted_chunks_body.inc, compiled once per ISA like the flash tiles). Only plain data
// crosses it (attention_flash_tiles.hpp says why: the ISA translation units are built with
// different -m flags). The semantics are in include/patchbay/kernels/sorted_chunk_attention.hpp.
//
// One chunk n of c query slots [n c, n c + c) against its window of key slots [kb, n c + c),
// kb = n c - c when the previous chunk's first slot has the same group, else n c; W = the
// window's key count (c or 2 c). Scores are key-major, as in the flash tiles, so that the
// per-query softmax statistics are whole vectors over the queries and only the c query rows are
// ever transposed. With cp = c and wp = W rounded up to 16, dp = D rounded up to 16:
//   S^T [W][cp] = K Q^T         K gathered rows [wp][dp], Q^T = scale * Q gathered [D][cp]
//   forward:  P^T = exp(S^T - max), O [c][dp] = P V   (A = P^T read transposed)
//   backward: P^T = exp((S^T - max_i) - log_sum_i),  dP^T = V dO^T,  dS^T = P^T (dP^T - delta)
//             dV [W][dp] = P^T dO,  dK [W][dp] = dS^T (scale Q),  dQ [c][dp] = dS K
// every product on the flash tiles' register micro GEMM (small_gemm.inc).
#pragma once

#include <cstdint>

namespace patchbay::kernels::sorted_chunks {

// One row (one batch x head sequence). Pointers a pass does not use may be null.
struct RowProblem {
  std::int64_t length = 0, head_dim = 0, slots = 0, chunk_len = 0;  // T, D, S, c
  std::int64_t rounds = 0;                                          // occurrences of every position
  float scale = 1.0f, self_bias = 0.0f;
  bool causal = true, dedup = false;
  bool bf16 = false;         // bf16 operands, f32 accumulation (sorted_chunks_body.inc)
  const float* q = nullptr;  // [T][D]
  const float* k = nullptr;
  const float* v = nullptr;
  const std::int32_t* position = nullptr;    // [S], -1 padding
  const std::int32_t* group = nullptr;       // [S]
  const std::int32_t* occurrence = nullptr;  // [T][rounds]: slot of the r-th occurrence
  const float* log_count = nullptr;          // [rounds + 1]: log(n)
  float* out = nullptr;                      // [T][D] (forward)
  float* stat = nullptr;                     // [T][2] (forward) max, log-sum (see the header)
  const float* stat_in = nullptr;            // [T][2] (backward)
  const float* delta = nullptr;              // [T]    (backward) dout . out
  const float* dout = nullptr;               // [T][D] (backward)
  float* dq = nullptr;                       // [T][D], added into (the driver zeroes them)
  float* dk = nullptr;
  float* dv = nullptr;
};

// One thread's scratch, carved by the driver (float blocks multiples of 16 floats). wp_max =
// round_up16(2 c); rounds_max = the most rounds of any row of the call.
struct ChunkScratch {
  float* q_t;                    // [dp][cp]     scale * Q^T
  float* do_t;                   // [dp][cp]     dO^T (backward)
  float* q_g;                    // [cp][dp]     scale * Q rows (backward)
  float* do_g;                   // [cp][dp]     dO rows (backward)
  float* k_g;                    // [wp_max][dp] K rows
  float* v_g;                    // [wp_max][dp] V rows
  float* s_t;                    // [wp_max][cp] scores, then probabilities
  float* g_t;                    // [wp_max][cp] dP, then dS (backward)
  float* o;                      // [cp][dp]     O (forward) or dQ (backward)
  float* dk_tile;                // [wp_max][dp]
  float* dv_tile;                // [wp_max][dp]
  float* row_max;                // [cp]
  float* row_sum;                // [cp]
  std::int32_t* query_position;  // [cp]
  std::int32_t* query_group;     // [cp]
  std::int32_t* key_position;    // [wp_max]
  std::int32_t* key_group;       // [wp_max]
  std::int32_t* count;           // [cp]  rounds holding a pair (dedup)
  std::int32_t* query_round;     // [rounds_max][2][cp]     group, chunk of each round's slot
  std::int32_t* key_round;       // [rounds_max][2][wp_max]
};

struct ChunkKernels {
  void (*forward_row)(const RowProblem& p, const ChunkScratch& s);
  void (*backward_row)(const RowProblem& p, const ChunkScratch& s);
};

ChunkKernels chunk_kernels_generic();
ChunkKernels chunk_kernels_avx2();
ChunkKernels chunk_kernels_avx512();

}  // namespace patchbay::kernels::sorted_chunks
