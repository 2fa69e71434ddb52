// Private seam between the flash-attention driver (attention_flash.cpp: validation, OpenMP,
// workspace) and the tile kernels (attention_flash_tiles_body.inc, compiled once per ISA).
// The driver owns all memory and hands each tile call pointers into one thread's scratch.
// Only plain data crosses this seam: the ISA translation units are built with different
// -m flags, so no inline function or template may be shared between them (an inline symbol
// built for AVX-512 could be picked by the linker for the generic path).
#pragma once

#include <cstdint>

#include "patchbay/kernels/attention_flash.hpp"

namespace patchbay::kernels::flash_tiles {

// Tile sizes (rows of Q per tile, rows of K/V per tile). Both multiples of 16 (one 512-bit
// vector of f32). 64x64 keeps one thread's scratch under ~200 KiB for D = 128 (fits L2).
inline constexpr std::int64_t kQueryTile = 64;  // Br
inline constexpr std::int64_t kKeyTile = 64;    // Bc
inline constexpr std::int64_t kVector = 16;     // floats per 512-bit vector

// Scratch of one thread for the forward. dp = head_dim rounded up to kVector.
struct ForwardScratch {
  float* q_t;      // [D][kQueryTile]   scale * Q tile, transposed, padded columns zero
  float* s_t;      // [kKeyTile][kQueryTile]  scores then probabilities, transposed (key-major)
  float* v_pad;    // [kKeyTile][dp]    V tile copy, used only when D % 16 != 0
  float* o;        // [kQueryTile][dp]  unnormalised output accumulator
  float* row_max;  // [kQueryTile]      running max m
  float* row_sum;  // [kQueryTile]      running sum l
  float* alpha;    // [kQueryTile]      per-row rescale e^{m_old - m_new} of the current key tile
};

// Buffers of the backward shared by all threads, filled once per call before the tiles run.
// q_len_padded = Tq rounded up to kVector; padding columns are zero.
struct BackwardShared {
  const float* delta;  // [B][H][Tq]               rowsum(dO * O)
  const float* q_t;    // [B][H][D][q_len_padded]  scale * Q, transposed
  const float* do_t;   // [B][H][D][q_len_padded]  dO, transposed
  std::int64_t q_len_padded;
};

// Scratch of one thread for the backward.
struct BackwardScratch {
  float* q_pad;   // [kQueryTile][dp]  Q tile, row-major, zero padded (only when D % 16 != 0)
  float* do_pad;  // [kQueryTile][dp]  dO tile, row-major, zero padded (only when D % 16 != 0)
  float* k_pad;   // [kKeyTile][dp]    K tile, row-major, zero padded
  float* p_t;     // [kKeyTile][kQueryTile]  P transposed
  float* ds_t;    // [kKeyTile][kQueryTile]  dP then dS, transposed
  float* dk;      // [kKeyTile][dp]    dK accumulator (unscaled)
  float* dv;      // [kKeyTile][dp]    dV accumulator
  float* row_lse;    // [kQueryTile]
  float* row_delta;  // [kQueryTile]
};

struct TileKernels {
  // Rows [q0, q0+rows) of query head h in batch b: writes out and lse for those rows.
  void (*forward_query_tile)(const AttentionParams& p, std::int64_t b, std::int64_t h,
                             std::int64_t q0, std::int64_t rows, const ForwardScratch& s);
  // Keys [k0, k0+keys) of kv head hk in batch b, over every query head of its group and every
  // query that sees them: writes dk, dv for those keys and adds the unscaled dS*K into
  // dq_acc ([B][H][Tq][dp], this thread's own accumulator).
  void (*backward_key_tile)(const AttentionParams& p, std::int64_t b, std::int64_t hk,
                            std::int64_t k0, std::int64_t keys, const BackwardShared& shared,
                            float* dq_acc, const BackwardScratch& s);
};

TileKernels tile_kernels_generic();
TileKernels tile_kernels_avx2();
TileKernels tile_kernels_avx512();

}  // namespace patchbay::kernels::flash_tiles
