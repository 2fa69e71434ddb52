// Block-sparse scaled-dot-product attention for CPU, f32: the key axis and the (absolute)
// query axis are cut into blocks of `block_size` positions and a per-head 0/1 layout says
// which (query block, key block) tiles are computed at all. Skipped tiles cost nothing: the
// forward keeps an online softmax (running max, running sum, rescaled accumulator) over the
// active tiles of a query block only, the backward recomputes probabilities from the saved
// row log-sum-exp over the same tiles. Work and memory are proportional to the number of
// active tiles (never Tq x Tk). The tiles are flash attention's (attention_flash.hpp): the
// same AVX-512 / AVX2 / generic code, picked at run time or forced with `isa`, so a computed
// pair costs what it costs there. Scratch: the flash tile scratch per thread; the backward adds
// per thread a dq accumulator (B*H*Tq*D floats) and, shared, transposed Q and dO: O(Tq * D).
//
// Semantics (per batch b, query head h, kv head hk = h / (H / Hkv), offset = Tk - Tq >= 0):
//   a(i)          = i + offset                          absolute position of query i
//   visible(i,j)  = layout[h][a(i) / bs][j / bs] != 0
//                   && (!causal || j <= a(i))           (bottom-right aligned, within-block)
//                   && (window <= 0 || j > a(i) - window)
//   lse[i]        = log sum_{visible j} exp(scale <q_i, k_j>);  out[i] = sum_j P_ij v_j
// A row with no visible key gets out = 0, lse = -inf and zero gradients.
// Layout: int32 [H][rows][cols], row-major, rows == cols == ceil(Tk / bs).
// Backward, as in attention_flash.hpp: D_i = <dout_i, out_i>, dS = P (dP - D_i),
// dq = scale dS k, dk = scale dS^T q, dv = P^T dout; dq/dk/dv are overwritten.
// The double-precision naive reference (block_sparse_attention_reference_*) evaluates
// visible() for every (i, j) of a dense Tq x Tk score matrix: for tests only.
#pragma once

#include <cstdint>
#include <string>

#include "patchbay/kernels/attention_flash.hpp"

namespace patchbay::kernels {

struct BlockSparseParams {
  std::int64_t batch = 0, heads = 0, kv_heads = 0, q_len = 0, kv_len = 0, head_dim = 0;
  // Contiguous [B, H, Tq, D] (q, out, dout, dq) and [B, Hkv, Tk, D] (k, v, dk, dv).
  const float* q = nullptr;
  const float* k = nullptr;
  const float* v = nullptr;
  float* out = nullptr;  // forward output
  float* lse = nullptr;  // [B, H, Tq], forward output, backward input
  float scale = 0.0f;
  bool causal = false;
  std::int64_t window = 0;               // > 0: keys j > a(i) - window only
  const std::int32_t* layout = nullptr;  // [H, rows, cols]; see the top of the file
  std::int64_t block_size = 0;
  const float* dout = nullptr;  // backward only
  float* dq = nullptr;
  float* dk = nullptr;
  float* dv = nullptr;
  int num_threads = 0;  // 0: OpenMP default
  // Code path of the tiles: automatic picks the widest the CPU has; a forced one the CPU
  // lacks is refused (as in AttentionParams). Tests force each to cover every build.
  KernelIsa isa = KernelIsa::automatic;
};

// Number of layout rows/cols for kv_len keys: ceil(kv_len / block_size).
std::int64_t block_sparse_layout_blocks(std::int64_t kv_len, std::int64_t block_size);

// Empty when p is usable (forward: backward == false), else one sentence on what is wrong.
std::string block_sparse_params_error(const BlockSparseParams& p, bool backward);

[[nodiscard]] std::string block_sparse_attention_forward(const BlockSparseParams& p);
[[nodiscard]] std::string block_sparse_attention_backward(const BlockSparseParams& p);

// visible(i, j) for head h, as defined above (used by the kernel and the reference).
inline bool block_sparse_visible(const BlockSparseParams& p, std::int64_t h, std::int64_t i,
                                 std::int64_t j) {
  const std::int64_t a = i + (p.kv_len - p.q_len);
  const std::int64_t blocks = (p.kv_len + p.block_size - 1) / p.block_size;
  if (p.layout[(h * blocks + a / p.block_size) * blocks + j / p.block_size] == 0) return false;
  if (p.causal && j > a) return false;
  return p.window <= 0 || j > a - p.window;
}

// Naive references (double accumulation, dense masked score rows).
[[nodiscard]] std::string block_sparse_attention_reference_forward(const BlockSparseParams& p);
[[nodiscard]] std::string block_sparse_attention_reference_backward(const BlockSparseParams& p);

}  // namespace patchbay::kernels
