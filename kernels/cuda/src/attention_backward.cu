// Flash-style causal attention backward (attention.hpp), f32 on CUDA cores; the work split is
// described in attention_tiles.cuh. FlashAttention-2's recomputation in two deterministic
// kernels after the row sums delta = sum(dout * out): one block per 64 key rows sums dK, dV
// over the query tiles from its first key on; one block per 64 query rows sums dQ over the key
// tiles up to its last query. Diagonal tiles are masked inside.
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

// delta[row] = sum_d dout * out: one warp per row, 8 rows per block.
__global__ void attention_delta_kernel(const float* out, const float* dout, float* delta,
                                       int64_t rows, int64_t dim) {
  const int64_t row = int64_t(blockIdx.x) * 8 + threadIdx.x / 32;
  if (row >= rows) return;
  float sum = 0.0f;
  for (int64_t d = threadIdx.x % 32; d < dim; d += 32)
    sum += out[row * dim + d] * dout[row * dim + d];
  sum = detail::warp_sum(sum);
  if (threadIdx.x % 32 == 0) delta[row] = sum;
}

// One block owns kRows key rows and sums their dK, dV over the queries i >= key.
template <int D>
__global__ void __launch_bounds__(kRows* D / 32)
    attention_backward_dkdv_kernel(const float* q, const float* k, const float* v,
                                   const float* dout, const float* lse, const float* delta,
                                   float* dk, float* dv, int64_t steps, float scale,
                                   const int32_t* segments, int64_t heads) {
  constexpr int G = D / kDimsPerThread;
  __shared__ float q_tile[kTile][D];
  __shared__ float do_tile[kTile][D];
  __shared__ float lse_tile[kTile], delta_tile[kTile];
  const int64_t head_offset = int64_t(blockIdx.y) * steps * D;
  const int64_t row_offset = int64_t(blockIdx.y) * steps;
  const int part = threadIdx.x % G;
  const int64_t first_key = int64_t(blockIdx.x) * kRows;
  const int64_t key = first_key + threadIdx.x / G;
  const bool active = key < steps;
  float k_reg[kDimsPerThread], v_reg[kDimsPerThread], dk_acc[kDimsPerThread],
      dv_acc[kDimsPerThread];
#pragma unroll
  for (int i = 0; i < kDimsPerThread; ++i) {
    k_reg[i] = active ? k[head_offset + key * D + part + G * i] : 0.0f;
    v_reg[i] = active ? v[head_offset + key * D + part + G * i] : 0.0f;
    dk_acc[i] = dv_acc[i] = 0.0f;
  }
  const int64_t query_end = detail::segment_query_end(segments, heads, steps, key, active);
  for (int64_t query0 = first_key / kTile * kTile; query0 < steps; query0 += kTile) {
    __syncthreads();
    load_tile<D>(q_tile, q + head_offset, query0, steps);
    load_tile<D>(do_tile, dout + head_offset, query0, steps);
    if (threadIdx.x < kTile) {
      const int64_t query = query0 + threadIdx.x;
      lse_tile[threadIdx.x] = query < steps ? lse[row_offset + query] : 0.0f;
      delta_tile[threadIdx.x] = query < steps ? delta[row_offset + query] : 0.0f;
    }
    __syncthreads();
#pragma unroll 4
    for (int j = 0; j < kTile; ++j) {
      float score = 0.0f, dp = 0.0f;
#pragma unroll
      for (int i = 0; i < kDimsPerThread; ++i) {
        score += q_tile[j][part + G * i] * k_reg[i];
        dp += do_tile[j][part + G * i] * v_reg[i];
      }
      score = group_sum<G>(score);
      dp = group_sum<G>(dp);
      const int64_t query = query0 + j;
      const bool valid = active && query >= key && query < query_end;
      const float p = valid ? expf(score * scale - lse_tile[j]) : 0.0f;
      const float ds = p * (dp - delta_tile[j]);
#pragma unroll
      for (int i = 0; i < kDimsPerThread; ++i) {
        dv_acc[i] += p * do_tile[j][part + G * i];
        dk_acc[i] += ds * q_tile[j][part + G * i];
      }
    }
  }
  if (!active) return;
#pragma unroll
  for (int i = 0; i < kDimsPerThread; ++i) {
    dk[head_offset + key * D + part + G * i] = dk_acc[i] * scale;
    dv[head_offset + key * D + part + G * i] = dv_acc[i];
  }
}

// One block owns kRows query rows and sums their dQ over the keys j <= query.
template <int D>
__global__ void __launch_bounds__(kRows* D / 32)
    attention_backward_dq_kernel(const float* q, const float* k, const float* v, const float* dout,
                                 const float* lse, const float* delta, float* dq, int64_t steps,
                                 float scale, const int32_t* segments, int64_t heads) {
  constexpr int G = D / kDimsPerThread;
  __shared__ float k_tile[kTile][D];
  __shared__ float v_tile[kTile][D];
  const int64_t head_offset = int64_t(blockIdx.y) * steps * D;
  const int part = threadIdx.x % G;
  const int64_t first_row = int64_t(blockIdx.x) * kRows;
  const int64_t row = first_row + threadIdx.x / G;
  const bool active = row < steps;
  float q_reg[kDimsPerThread], do_reg[kDimsPerThread], dq_acc[kDimsPerThread];
#pragma unroll
  for (int i = 0; i < kDimsPerThread; ++i) {
    q_reg[i] = active ? q[head_offset + row * D + part + G * i] : 0.0f;
    do_reg[i] = active ? dout[head_offset + row * D + part + G * i] : 0.0f;
    dq_acc[i] = 0.0f;
  }
  const float row_lse = active ? lse[int64_t(blockIdx.y) * steps + row] : 0.0f;
  const float row_delta = active ? delta[int64_t(blockIdx.y) * steps + row] : 0.0f;
  const int64_t first_key = detail::segment_first_key(segments, heads, steps, row, active);
  const int64_t last_row = min(first_row + kRows, steps) - 1;
  for (int64_t key0 = 0; key0 <= last_row; key0 += kTile) {
    __syncthreads();
    load_tile<D>(k_tile, k + head_offset, key0, steps);
    load_tile<D>(v_tile, v + head_offset, key0, steps);
    __syncthreads();
#pragma unroll 4
    for (int j = 0; j < kTile; ++j) {
      float score = 0.0f, dp = 0.0f;
#pragma unroll
      for (int i = 0; i < kDimsPerThread; ++i) {
        score += q_reg[i] * k_tile[j][part + G * i];
        dp += do_reg[i] * v_tile[j][part + G * i];
      }
      score = group_sum<G>(score);
      dp = group_sum<G>(dp);
      const bool valid = active && key0 + j <= row && key0 + j >= first_key;
      const float p = valid ? expf(score * scale - row_lse) : 0.0f;
      const float ds = p * (dp - row_delta);
#pragma unroll
      for (int i = 0; i < kDimsPerThread; ++i) dq_acc[i] += ds * k_tile[j][part + G * i];
    }
  }
  if (!active) return;
#pragma unroll
  for (int i = 0; i < kDimsPerThread; ++i)
    dq[head_offset + row * D + part + G * i] = dq_acc[i] * scale;
}

template <int D>
cudaError_t launch_backward(const float* q, const float* k, const float* v, const float* dout,
                            const float* lse, const float* delta, float* dq, float* dk, float* dv,
                            int64_t batch_heads, int64_t steps, float scale, cudaStream_t stream,
                            const int32_t* segments, int64_t heads) {
  attention_backward_dkdv_kernel<D><<<row_grid(batch_heads, steps), kRows * D / 32, 0, stream>>>(
      q, k, v, dout, lse, delta, dk, dv, steps, scale, segments, heads);
  if (const cudaError_t s = cudaGetLastError(); s != cudaSuccess) return s;
  attention_backward_dq_kernel<D><<<row_grid(batch_heads, steps), kRows * D / 32, 0, stream>>>(
      q, k, v, dout, lse, delta, dq, steps, scale, segments, heads);
  return cudaGetLastError();
}

}  // namespace

cudaError_t causal_attention_backward(const float* q, const float* k, const float* v,
                                      const float* out, const float* dout, const float* lse,
                                      float* delta, float* dq, float* dk, float* dv,
                                      int64_t batch_heads, int64_t steps, int64_t head_dim,
                                      float scale, cudaStream_t stream, const int32_t* segments,
                                      int64_t heads) {
  if (batch_heads <= 0 || steps <= 0) return cudaSuccess;
  if (heads <= 0 || batch_heads % heads != 0) return cudaErrorInvalidValue;
  if (head_dim != 32 && head_dim != 64 && head_dim != 128) return cudaErrorInvalidValue;
  const int64_t rows = batch_heads * steps;
  attention_delta_kernel<<<static_cast<unsigned>((rows + 7) / 8), 256, 0, stream>>>(
      out, dout, delta, rows, head_dim);
  if (const cudaError_t s = cudaGetLastError(); s != cudaSuccess) return s;
  if (head_dim == 32)
    return launch_backward<32>(q, k, v, dout, lse, delta, dq, dk, dv, batch_heads, steps, scale,
                               stream, segments, heads);
  if (head_dim == 64)
    return launch_backward<64>(q, k, v, dout, lse, delta, dq, dk, dv, batch_heads, steps, scale,
                               stream, segments, heads);
  return launch_backward<128>(q, k, v, dout, lse, delta, dq, dk, dv, batch_heads, steps, scale,
                              stream, segments, heads);
}

}  // namespace patchbay::kernels::cuda
