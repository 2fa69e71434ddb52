// Private seam between the attention drivers (attention_flash.cpp and the block-sparse
// block_sparse_attention.cpp: validation, OpenMP, workspace) and the tile kernels
// (attention_flash_tiles_body.inc, compiled once per ISA). The drivers own all memory and hand
// each tile call pointers into one thread's scratch. The block-sparse kernel runs the same
// tiles over the key (forward) or query (backward) spans its layout activates.
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

// A half-open range [begin, end) of key positions (forward) or query rows (backward).
struct Span {
  std::int64_t begin;
  std::int64_t end;
};

// How a window is read when not causal: flash attention's is two-sided (|pos - j| < window),
// the block-sparse kernel's one-sided (j > pos - window). With causal both are one-sided.
enum class WindowSides { flash, one_sided };

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
// q_len_padded >= Tq, a multiple of kVector; padding columns are zero. The flash driver uses
// Tq rounded up to kVector; the block-sparse one adds kVector more, because its query spans
// start anywhere and a tile reads round_up(rows, kVector) columns from its first row.
struct BackwardShared {
  const float* delta;  // [B][H][Tq]               rowsum(dO * O)
  const float* q_t;    // [B][H][D][q_len_padded]  scale * Q, transposed
  const float* do_t;   // [B][H][D][q_len_padded]  dO, transposed
  std::int64_t q_len_padded;
};

// Scratch of one thread for the backward.
struct BackwardScratch {
  float* q_pad;      // [kQueryTile][dp]  Q tile, row-major, zero padded (only when D % 16 != 0)
  float* do_pad;     // [kQueryTile][dp]  dO tile, row-major, zero padded (only when D % 16 != 0)
  float* k_pad;      // [kKeyTile][dp]    K tile, row-major, zero padded
  float* p_t;        // [kKeyTile][kQueryTile]  P transposed
  float* ds_t;       // [kKeyTile][kQueryTile]  dP then dS, transposed
  float* dk;         // [kKeyTile][dp]    dK accumulator (unscaled)
  float* dv;         // [kKeyTile][dp]    dV accumulator
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
  // Block-sparse forward: as forward_query_tile with only the keys of key_spans (sorted,
  // disjoint) and a one-sided window. span_count may be 0 (the rows get out 0, lse -inf).
  void (*sparse_forward_query_tile)(const AttentionParams& p, std::int64_t b, std::int64_t h,
                                    std::int64_t q0, std::int64_t rows, const Span* key_spans,
                                    std::int64_t span_count, const ForwardScratch& s);
  // Block-sparse backward: as backward_key_tile, the query head g = h - hk * (H / Hkv) of
  // the group seeing only the query rows of query_spans[head_span_begin[g] ..
  // head_span_begin[g + 1]) (sorted, disjoint), with a one-sided window.
  void (*sparse_backward_key_tile)(const AttentionParams& p, std::int64_t b, std::int64_t hk,
                                   std::int64_t k0, std::int64_t keys, const Span* query_spans,
                                   const std::int64_t* head_span_begin,
                                   const BackwardShared& shared, float* dq_acc,
                                   const BackwardScratch& s);
  // Decode (the driver uses it for Tq = 1): query row i of head h in batch b on its own,
  // against its visible keys, writing out and lse; s.s_t holds kKeyTile scores, s.o one row.
  void (*forward_decode_row)(const AttentionParams& p, std::int64_t b, std::int64_t h,
                             std::int64_t i, const ForwardScratch& s);
};

// The tile kernels of a code path (automatic: attention_flash_resolved_isa()).
TileKernels tile_kernels_for(KernelIsa isa);

// Driver pieces shared by both drivers (defined in attention_flash.cpp, built without ISA
// flags). Per-thread regions: forward_scratch_floats / backward_scratch_floats floats each,
// carved by carve_forward / carve_backward from a 64-byte aligned base.
std::int64_t forward_scratch_floats(std::int64_t head_dim);
std::int64_t backward_scratch_floats(std::int64_t head_dim);
ForwardScratch carve_forward(float* base, std::int64_t head_dim);
BackwardScratch carve_backward(float* base, std::int64_t head_dim);
// Inside an OpenMP parallel region (it is an `omp for`, with its barrier): writes
// shared.delta = rowsum(dO * O) and the transposed scale*Q and dO with shared.q_len_padded
// columns per row, zeros past Tq.
void fill_backward_shared(const AttentionParams& p, const BackwardShared& shared);
// Inside an OpenMP parallel region (an `omp for`): dq = scale * sum over the team's
// accumulators, the accumulator of thread t at acc_base + t * acc_stride ([B][H][Tq][dp]).
void reduce_dq(const AttentionParams& p, const float* acc_base, std::int64_t acc_stride, int team);

TileKernels tile_kernels_generic();
TileKernels tile_kernels_avx2();
TileKernels tile_kernels_avx512();

}  // namespace patchbay::kernels::flash_tiles
