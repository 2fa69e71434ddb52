// Private seam between the causal linear attention driver (causal_linear_attention.cpp:
// validation, OpenMP over rows, scratch) and its chunk kernels (causal_linear_chunks_body.inc,
// compiled once per ISA like the flash tiles). Only plain data crosses it (see
// attention_flash_tiles.hpp for why: the ISA translation units are built with different -m
// flags).
//
// The chunked form of out_l = sum_{j <= l} (q_l . k_j) v_j over chunks of kChunk positions:
//   within a chunk   O_c  = mask(Q_c K_c^T) V_c          (a small GEMM, causal mask j <= l)
//   across chunks    O_c += Q_c S,  then  S += K_c^T V_c (S [E, M]: the chunks before)
// Backward, two sweeps over the chunks:
//   forward   dQ_c = mask(dO_c V_c^T) K_c + dO_c S^T,       S^T += V_c^T K_c
//   reverse   dV_c = mask(Q_c K_c^T)^T dO_c + K_c R,         R   += Q_c^T dO_c
//             dK_c = mask(dO_c V_c^T)^T Q_c + V_c R^T        (R^T copied from R)
// with R = sum over the later chunks of q_i dO_i^T [E, M]. Every product runs on the register-
// tiled micro GEMM of small_gemm.inc with f32 accumulation. Masked entries are exact zeros and
// the within-chunk products stop at the last row of each 16-row strip, so outputs (and dq) at
// position l are computed from positions <= l, and the chunk split does not depend on T.
#pragma once

#include <cstdint>

#include "patchbay/kernels/attention_flash.hpp"          // KernelIsa
#include "patchbay/kernels/causal_linear_attention.hpp"  // kCausalLinearChunk

namespace patchbay::kernels::linear_chunks {

// Positions per chunk, a multiple of kStrip. Per position the chunk costs about
// (kChunk / 2 + kStrip / 2) 2 (E + M) FLOP of masked products beside the 4 E M of the state:
// 32 did ~10% fewer FLOPs than 64 at E = M = 64 and ran as fast or faster (AVX2, one thread).
inline constexpr std::int64_t kChunk = kCausalLinearChunk;
inline constexpr std::int64_t kStrip = 16;  // rows per causal strip (and padding unit)

// One row (one batch x head sequence): contiguous row-major q, k [T, E], v [T, M] and the
// outputs. Forward reads q, k, v and writes out; backward reads q, k, v, dout and writes dq, dk,
// dv (pointers not used by a pass may be null).
struct RowProblem {
  std::int64_t length = 0, key_dim = 0, value_dim = 0;  // T, E, M
  // bf16 operands: q, k, v, dout hold bf16-exact values (the driver rounded them); the chunk
  // products and the states are rounded where a product reads them (causal_linear_attention.hpp).
  bool bf16 = false;
  const float* q = nullptr;
  const float* k = nullptr;
  const float* v = nullptr;
  const float* dout = nullptr;
  float* out = nullptr;
  float* dq = nullptr;
  float* dk = nullptr;
  float* dv = nullptr;
};

// One thread's scratch, carved by the driver; ep = E and mp = M rounded up to kStrip. Padding
// columns and rows are kept zero by the kernels.
struct ChunkScratch {
  float* k_t;      // [ep][kChunk]   K_c transposed
  float* v_t;      // [mp][kChunk]   V_c transposed
  float* q_pad;    // [kChunk][ep]   Q_c, padded
  float* k_pad;    // [kChunk][ep]   K_c, padded
  float* v_pad;    // [kChunk][mp]   V_c, padded
  float* do_pad;   // [kChunk][mp]   dO_c, padded
  float* scores;   // [kChunk][kChunk]  mask(Q_c K_c^T)
  float* grads;    // [kChunk][kChunk]  mask(dO_c V_c^T)
  float* out_e;    // [kChunk][ep]   an output chunk E wide (dq, dk)
  float* out_m;    // [kChunk][mp]   an output chunk M wide (out, dv)
  float* state;    // [ep][mp]       S (forward) or R (reverse sweep)
  float* state_t;  // [mp][ep]       S^T (dq sweep) or R^T (reverse sweep)
  float* state_b;  // [ep][mp]       bf16-rounded copy of state or state_t (bf16 only)
};

struct ChunkKernels {
  void (*forward_row)(const RowProblem& p, const ChunkScratch& s);
  void (*backward_row)(const RowProblem& p, const ChunkScratch& s);
  // dst[0, n) = src[0, n) rounded to bf16 (kept f32): the driver's copies of a row's inputs.
  void (*round_bf16)(const float* src, std::int64_t n, float* dst);
};

ChunkKernels chunk_kernels_generic();
ChunkKernels chunk_kernels_avx2();
ChunkKernels chunk_kernels_avx512();

}  // namespace patchbay::kernels::linear_chunks
