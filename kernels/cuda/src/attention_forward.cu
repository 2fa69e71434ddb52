// Flash-style causal attention forward (attention.hpp), f32 on CUDA cores; the work split is
// described in attention_tiles.cuh. Per key tile, the 32 scores are kept in registers, the
// running max is updated once per tile (online softmax), then the accumulator takes the tile's
// values. Causality: a block visits only the key tiles up to its last query, and masks inside
// the diagonal tile.
#include <cmath>

#include "attention_tiles.cuh"
#include "patchbay/kernels/cuda/attention.hpp"

namespace patchbay::kernels::cuda {
namespace {

using detail::group_sum;
using detail::kDimsPerThread;
using detail::kRows;
using detail::kTile;
using detail::load_tile;
using detail::row_grid;

template <int D>
__global__ void __launch_bounds__(kRows* D / 32)
    attention_forward_kernel(const float* q, const float* k, const float* v, float* out, float* lse,
                             int64_t steps, float scale, const int32_t* segments, int64_t heads) {
  constexpr int G = D / kDimsPerThread;
  __shared__ float k_tile[kTile][D];
  __shared__ float v_tile[kTile][D];
  const int64_t head_offset = int64_t(blockIdx.y) * steps * D;
  const int part = threadIdx.x % G;
  const int64_t first_row = int64_t(blockIdx.x) * kRows;
  const int64_t row = first_row + threadIdx.x / G;
  const bool active = row < steps;
  float q_reg[kDimsPerThread], acc[kDimsPerThread];
#pragma unroll
  for (int i = 0; i < kDimsPerThread; ++i) {
    q_reg[i] = active ? q[head_offset + row * D + part + G * i] * scale : 0.0f;
    acc[i] = 0.0f;
  }
  float running_max = -INFINITY, running_sum = 0.0f;
  const int64_t first_key = detail::segment_first_key(segments, heads, steps, row, active);
  const int64_t last_row = min(first_row + kRows, steps) - 1;
  for (int64_t key0 = 0; key0 <= last_row; key0 += kTile) {
    __syncthreads();  // the previous tile is consumed
    load_tile<D>(k_tile, k + head_offset, key0, steps);
    load_tile<D>(v_tile, v + head_offset, key0, steps);
    __syncthreads();
    float scores[kTile];
    float tile_max = -INFINITY;
#pragma unroll
    for (int j = 0; j < kTile; ++j) {
      float partial = 0.0f;
#pragma unroll
      for (int i = 0; i < kDimsPerThread; ++i) partial += q_reg[i] * k_tile[j][part + G * i];
      partial = group_sum<G>(partial);
      scores[j] = key0 + j <= row && key0 + j >= first_key && active ? partial : -INFINITY;
      tile_max = fmaxf(tile_max, scores[j]);
    }
    if (tile_max == -INFINITY) continue;  // every key of the tile is masked for this row
    const float new_max = fmaxf(running_max, tile_max);
    const float correction = expf(running_max - new_max);  // 0 on the first tile
    running_sum *= correction;
#pragma unroll
    for (int i = 0; i < kDimsPerThread; ++i) acc[i] *= correction;
#pragma unroll
    for (int j = 0; j < kTile; ++j) {
      const float p = expf(scores[j] - new_max);
      running_sum += p;
#pragma unroll
      for (int i = 0; i < kDimsPerThread; ++i) acc[i] += p * v_tile[j][part + G * i];
    }
    running_max = new_max;
  }
  if (!active) return;
  const float inverse_sum = 1.0f / running_sum;
#pragma unroll
  for (int i = 0; i < kDimsPerThread; ++i)
    out[head_offset + row * D + part + G * i] = acc[i] * inverse_sum;
  if (part == 0) lse[int64_t(blockIdx.y) * steps + row] = running_max + logf(running_sum);
}

template <int D>
cudaError_t launch_forward(const float* q, const float* k, const float* v, float* out, float* lse,
                           int64_t batch_heads, int64_t steps, float scale, cudaStream_t stream,
                           const int32_t* segments, int64_t heads) {
  attention_forward_kernel<D><<<row_grid(batch_heads, steps), kRows * D / 32, 0, stream>>>(
      q, k, v, out, lse, steps, scale, segments, heads);
  return cudaGetLastError();
}

}  // namespace

cudaError_t causal_attention_forward(const float* q, const float* k, const float* v, float* out,
                                     float* lse, int64_t batch_heads, int64_t steps,
                                     int64_t head_dim, float scale, cudaStream_t stream,
                                     const int32_t* segments, int64_t heads) {
  if (batch_heads <= 0 || steps <= 0) return cudaSuccess;
  if (heads <= 0 || batch_heads % heads != 0) return cudaErrorInvalidValue;
  if (head_dim == 32)
    return launch_forward<32>(q, k, v, out, lse, batch_heads, steps, scale, stream, segments,
                              heads);
  if (head_dim == 64)
    return launch_forward<64>(q, k, v, out, lse, batch_heads, steps, scale, stream, segments,
                              heads);
  if (head_dim == 128)
    return launch_forward<128>(q, k, v, out, lse, batch_heads, steps, scale, stream, segments,
                               heads);
  return cudaErrorInvalidValue;
}

}  // namespace patchbay::kernels::cuda
