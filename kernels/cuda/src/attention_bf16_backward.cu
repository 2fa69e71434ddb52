// bf16 tensor-core flash attention backward (attention_bf16.hpp): FlashAttention-2's
// recomputation in three deterministic kernels, no float atomics (the same inputs give the
// same bits; two extra products against the atomic dQ scheme, 7 instead of 5):
//   delta  = rowsum(dout * out)                         one warp per row, f32
//   dK, dV: a block per 64 keys, over the query tiles from its first key to its last key's
//           segment end: S^T = K Q^T, dP^T = V dO^T on tensor cores; on CUDA cores
//           P = exp(S scale - lse), dS = P (dP - delta), both rounded to bf16; then
//           dV += P^T dO, dK += dS^T Q on tensor cores (accumulators in registers)
//   dQ:     a block per 64 queries, over the key tiles from its first row's segment start to
//           its last row: S = Q K^T, dP = dO V^T, the same P and dS, dQ += dS K
// dK and dQ take the scale when written. Pieces in attention_bf16_tiles.cuh, arithmetic in
// math/flash_bf16.hpp (shared with the CPU twin).
#include <cmath>

#include "attention_bf16_tiles.cuh"
#include "patchbay/kernels/cuda/attention_bf16.hpp"
#include "reduce.cuh"

namespace patchbay::kernels::cuda {
namespace {

using namespace detail::flash;

// delta[row] = sum_d bf16 dout * f32 out: one warp per row, 8 rows per block.
__global__ void attention_bf16_delta_kernel(const float* out, const uint16_t* dout, float* delta,
                                            int64_t rows, int64_t dim) {
  const int64_t row = int64_t(blockIdx.x) * 8 + threadIdx.x / 32;
  if (row >= rows) return;
  float sum = 0.0f;
  for (int64_t d = threadIdx.x % 32; d < dim; d += 32)
    sum += out[row * dim + d] * math::float_from_bf16(dout[row * dim + d]);
  sum = detail::warp_sum(sum);
  if (threadIdx.x % 32 == 0) delta[row] = sum;
}

template <int D>
constexpr int backward_shared_bytes() {
  return 4 * carved_bytes(Dims<D>::kTileElems * 2) +  // two fixed, two streamed tiles
         2 * carved_bytes(kWarps * kFlashWarpRows * kScoreLd * 4) +  // S, dP slices
         2 * carved_bytes(kWarps * kFlashWarpRows * kProbLd * 2) +   // P, dS slices (bf16)
         2 * carved_bytes(kFlashTile * 4);                           // lse, delta of a tile
}

// One block owns 64 keys (16 per warp) and sums their dK, dV over the queries that see them.
template <int D>
__global__ void __launch_bounds__(kThreads)
    attention_bf16_dkdv_kernel(const uint16_t* q, const uint16_t* k, const uint16_t* v,
                               const uint16_t* dout, const float* lse, const float* delta,
                               float* dk, float* dv, int64_t steps, float scale,
                               const int32_t* segments, int64_t heads) {
  constexpr int kLd = Dims<D>::kLd;
  extern __shared__ __align__(128) unsigned char shared[];
  SharedCarver carve(shared);
  bf16* k_tile = carve.take<bf16>(Dims<D>::kTileElems);
  bf16* v_tile = carve.take<bf16>(Dims<D>::kTileElems);
  bf16* q_tile = carve.take<bf16>(Dims<D>::kTileElems);
  bf16* do_tile = carve.take<bf16>(Dims<D>::kTileElems);
  float* scores = carve.take<float>(kWarps * kFlashWarpRows * kScoreLd);
  float* dprobs = carve.take<float>(kWarps * kFlashWarpRows * kScoreLd);
  bf16* probs = carve.take<bf16>(kWarps * kFlashWarpRows * kProbLd);
  bf16* dscores = carve.take<bf16>(kWarps * kFlashWarpRows * kProbLd);
  float* lse_tile = carve.take<float>(kFlashTile);
  float* delta_tile = carve.take<float>(kFlashTile);

  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const int r = lane / 2, parity = lane % 2;  // columns parity, parity + 2, ...
  float* st_w = scores + warp * kFlashWarpRows * kScoreLd;
  float* dpt_w = dprobs + warp * kFlashWarpRows * kScoreLd;
  bf16* pt_w = probs + warp * kFlashWarpRows * kProbLd;
  bf16* dst_w = dscores + warp * kFlashWarpRows * kProbLd;
  const int64_t head = int64_t(blockIdx.y) * steps * D;
  const int64_t first_key = int64_t(blockIdx.x) * kFlashRows;
  const int64_t key = first_key + warp * kFlashWarpRows + r;
  const int32_t* seg = segment_row(segments, heads, steps);
  const int64_t query_end =
      seg != nullptr && key < steps ? math::segment_end(seg, steps, key) : steps;
  const int64_t last_key = min(first_key + kFlashRows, steps) - 1;
  const int64_t block_query_end = seg != nullptr ? math::segment_end(seg, steps, last_key) : steps;

  load_rows<D>(k_tile, k + head, first_key, steps);
  load_rows<D>(v_tile, v + head, first_key, steps);
  FragC dk_acc[D / 16], dv_acc[D / 16];
#pragma unroll
  for (int n = 0; n < D / 16; ++n) {
    wmma::fill_fragment(dk_acc[n], 0.0f);
    wmma::fill_fragment(dv_acc[n], 0.0f);
  }
  // Queries before first_key see none of its keys; tiles are aligned (kFlashRows == kFlashTile).
  for (int64_t query0 = first_key; query0 < block_query_end; query0 += kFlashTile) {
    __syncthreads();  // every warp is done with the previous Q, dO tiles
    load_rows<D>(q_tile, q + head, query0, steps);
    load_rows<D>(do_tile, dout + head, query0, steps);
    if (threadIdx.x < kFlashTile) {
      const int64_t query = query0 + threadIdx.x;
      lse_tile[threadIdx.x] = query < steps ? lse[int64_t(blockIdx.y) * steps + query] : 0.0f;
      delta_tile[threadIdx.x] = query < steps ? delta[int64_t(blockIdx.y) * steps + query] : 0.0f;
    }
    __syncthreads();
    product_rows_by_rows_t<D, true>(k_tile + warp * kFlashWarpRows * kLd, q_tile, st_w);
    product_rows_by_rows_t<D, true>(v_tile + warp * kFlashWarpRows * kLd, do_tile, dpt_w);
    __syncwarp();
#pragma unroll 2  // kept short: the D = 128 dK/dV kernel runs at 248 of 255 registers
    for (int c = 0; c < 32; ++c) {
      const int col = 2 * c + parity;
      const bool visible = math::flash_visible_from_key(key, query0 + col, query_end, steps);
      const float p = math::flash_backward_probability(st_w[r * kScoreLd + col] * scale,
                                                       lse_tile[col], visible);
      const float ds = math::flash_score_gradient(p, dpt_w[r * kScoreLd + col], delta_tile[col]);
      pt_w[r * kProbLd + col] = to_bf16(p);
      dst_w[r * kProbLd + col] = to_bf16(ds);
    }
    __syncwarp();
    accumulate_probs_by_rows<D>(dv_acc, pt_w, do_tile);
    accumulate_probs_by_rows<D>(dk_acc, dst_w, q_tile);
  }
  const int64_t warp_first_key = first_key + warp * kFlashWarpRows;
  store_rows<D>(dk_acc, st_w, dk + head, warp_first_key, steps, scale);
  store_rows<D>(dv_acc, st_w, dv + head, warp_first_key, steps, 1.0f);
}

// One block owns 64 queries (16 per warp) and sums their dQ over the keys they see.
template <int D>
__global__ void __launch_bounds__(kThreads)
    attention_bf16_dq_kernel(const uint16_t* q, const uint16_t* k, const uint16_t* v,
                             const uint16_t* dout, const float* lse, const float* delta, float* dq,
                             int64_t steps, float scale, const int32_t* segments, int64_t heads) {
  constexpr int kLd = Dims<D>::kLd;
  extern __shared__ __align__(128) unsigned char shared[];
  SharedCarver carve(shared);
  bf16* q_tile = carve.take<bf16>(Dims<D>::kTileElems);
  bf16* do_tile = carve.take<bf16>(Dims<D>::kTileElems);
  bf16* k_tile = carve.take<bf16>(Dims<D>::kTileElems);
  bf16* v_tile = carve.take<bf16>(Dims<D>::kTileElems);
  float* scores = carve.take<float>(kWarps * kFlashWarpRows * kScoreLd);
  float* dprobs = carve.take<float>(kWarps * kFlashWarpRows * kScoreLd);
  bf16* dscores = carve.take<bf16>(kWarps * kFlashWarpRows * kProbLd);

  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const int r = lane / 2, parity = lane % 2;  // columns parity, parity + 2, ...
  float* s_w = scores + warp * kFlashWarpRows * kScoreLd;
  float* dp_w = dprobs + warp * kFlashWarpRows * kScoreLd;
  bf16* ds_w = dscores + warp * kFlashWarpRows * kProbLd;
  const int64_t head = int64_t(blockIdx.y) * steps * D;
  const int64_t first_row = heaviest_first_block() * kFlashRows;
  const int64_t query = first_row + warp * kFlashWarpRows + r;
  const int32_t* seg = segment_row(segments, heads, steps);
  const int64_t first_key = seg != nullptr && query < steps ? math::segment_begin(seg, query) : 0;
  const int64_t tile_begin =
      seg != nullptr ? math::segment_begin(seg, first_row) / kFlashTile * kFlashTile : 0;
  const int64_t last_row = min(first_row + kFlashRows, steps) - 1;
  const float row_lse = query < steps ? lse[int64_t(blockIdx.y) * steps + query] : 0.0f;
  const float row_delta = query < steps ? delta[int64_t(blockIdx.y) * steps + query] : 0.0f;

  load_rows<D>(q_tile, q + head, first_row, steps);
  load_rows<D>(do_tile, dout + head, first_row, steps);
  FragC dq_acc[D / 16];
#pragma unroll
  for (int n = 0; n < D / 16; ++n) wmma::fill_fragment(dq_acc[n], 0.0f);
  for (int64_t key0 = tile_begin; key0 <= last_row; key0 += kFlashTile) {
    __syncthreads();
    load_rows<D>(k_tile, k + head, key0, steps);
    load_rows<D>(v_tile, v + head, key0, steps);
    __syncthreads();
    product_rows_by_rows_t<D>(q_tile + warp * kFlashWarpRows * kLd, k_tile, s_w);
    product_rows_by_rows_t<D>(do_tile + warp * kFlashWarpRows * kLd, v_tile, dp_w);
    __syncwarp();
    for (int c = 0; c < 32; ++c) {
      const int col = 2 * c + parity;
      const bool visible = math::flash_visible(query, key0 + col, first_key, steps);
      const float p =
          math::flash_backward_probability(s_w[r * kScoreLd + col] * scale, row_lse, visible);
      ds_w[r * kProbLd + col] =
          to_bf16(math::flash_score_gradient(p, dp_w[r * kScoreLd + col], row_delta));
    }
    __syncwarp();
    accumulate_probs_by_rows<D>(dq_acc, ds_w, k_tile);
  }
  store_rows<D>(dq_acc, s_w, dq + head, first_row + warp * kFlashWarpRows, steps, scale);
}

template <int D>
cudaError_t launch_backward(const uint16_t* q, const uint16_t* k, const uint16_t* v,
                            const uint16_t* dout, const float* lse, const float* delta, float* dq,
                            float* dk, float* dv, int64_t batch_heads, int64_t steps, float scale,
                            cudaStream_t stream, const int32_t* segments, int64_t heads) {
  constexpr int bytes = backward_shared_bytes<D>();
  for (const void* kernel : {reinterpret_cast<const void*>(attention_bf16_dkdv_kernel<D>),
                             reinterpret_cast<const void*>(attention_bf16_dq_kernel<D>)})
    if (const cudaError_t s =
            cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, bytes);
        s != cudaSuccess)
      return s;
  const dim3 grid(static_cast<unsigned>((steps + kFlashRows - 1) / kFlashRows),
                  static_cast<unsigned>(batch_heads));
  attention_bf16_dkdv_kernel<D><<<grid, kThreads, bytes, stream>>>(
      q, k, v, dout, lse, delta, dk, dv, steps, scale, segments, heads);
  if (const cudaError_t s = cudaGetLastError(); s != cudaSuccess) return s;
  attention_bf16_dq_kernel<D><<<grid, kThreads, bytes, stream>>>(q, k, v, dout, lse, delta, dq,
                                                                 steps, scale, segments, heads);
  return cudaGetLastError();
}

}  // namespace

cudaError_t causal_attention_bf16_backward(const uint16_t* q, const uint16_t* k, const uint16_t* v,
                                           const float* out, const uint16_t* dout, const float* lse,
                                           float* delta, float* dq, float* dk, float* dv,
                                           int64_t batch_heads, int64_t steps, int64_t head_dim,
                                           float scale, cudaStream_t stream,
                                           const int32_t* segments, int64_t heads) {
  if (batch_heads <= 0 || steps <= 0) return cudaSuccess;
  if (const cudaError_t s = detail::flash_bf16_check(batch_heads, head_dim, heads, {q, k, v, dout});
      s != cudaSuccess)
    return s;
  const int64_t rows = batch_heads * steps;
  attention_bf16_delta_kernel<<<static_cast<unsigned>((rows + 7) / 8), 256, 0, stream>>>(
      out, dout, delta, rows, head_dim);
  if (const cudaError_t s = cudaGetLastError(); s != cudaSuccess) return s;
  if (head_dim == 64)
    return launch_backward<64>(q, k, v, dout, lse, delta, dq, dk, dv, batch_heads, steps, scale,
                               stream, segments, heads);
  return launch_backward<128>(q, k, v, dout, lse, delta, dq, dk, dv, batch_heads, steps, scale,
                              stream, segments, heads);
}

}  // namespace patchbay::kernels::cuda
