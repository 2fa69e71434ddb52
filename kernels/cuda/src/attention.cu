// Flash-style causal attention (attention.hpp), f32 on CUDA cores.
// Work split: a group of G = D/32 threads owns one row (query row in the forward and dQ
// kernels, key row in the dK/dV kernel); thread `part` of the group holds dims part + G*i,
// i < 32 (interleaved, so the group's shared-memory reads hit distinct banks), and dot products
// are summed across the group with log2(G) shuffles. A block holds kRows = 64 rows; the other
// operand streams through shared memory in tiles of kTile = 32 rows.
// Forward: per key tile, the 32 scores are kept in registers, the running max is updated once
// per tile (online softmax), then the accumulator takes the tile's values.
// Causality: a block visits only the tiles that hold keys <= its last query (forward, dQ) or
// queries >= its first key (dK/dV), and masks inside the diagonal tiles.
#include <cmath>

#include "patchbay/kernels/cuda/attention.hpp"
#include "reduce.cuh"

namespace patchbay::kernels::cuda {
namespace {

constexpr int kRows = 64;
constexpr int kTile = 32;
constexpr int kDimsPerThread = 32;

template <int G>
__device__ __forceinline__ float group_sum(float value) {
#pragma unroll
  for (int offset = 1; offset < G; offset *= 2)
    value += __shfl_xor_sync(detail::kFullMask, value, offset);
  return value;
}

// Loads rows [first, first + kTile) of a [steps x D] matrix into tile (zeros past the end).
template <int D>
__device__ __forceinline__ void load_tile(float (*tile)[D], const float* matrix, int64_t first,
                                          int64_t steps) {
  for (int index = threadIdx.x; index < kTile * D; index += blockDim.x) {
    const int r = index / D, d = index % D;
    tile[r][d] = first + r < steps ? matrix[(first + r) * D + d] : 0.0f;
  }
}

template <int D>
__global__ void __launch_bounds__(kRows* D / 32)
    attention_forward_kernel(const float* q, const float* k, const float* v, float* out, float* lse,
                             int64_t steps, float scale) {
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
      scores[j] = key0 + j <= row && active ? partial : -INFINITY;
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
                                   float* dk, float* dv, int64_t steps, float scale) {
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
      const bool valid = active && query >= key && query < steps;
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
                                 float scale) {
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
      const bool valid = active && key0 + j <= row;
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

dim3 row_grid(int64_t batch_heads, int64_t steps) {
  return dim3(static_cast<unsigned>((steps + kRows - 1) / kRows),
              static_cast<unsigned>(batch_heads));
}

template <int D>
cudaError_t launch_forward(const float* q, const float* k, const float* v, float* out, float* lse,
                           int64_t batch_heads, int64_t steps, float scale, cudaStream_t stream) {
  attention_forward_kernel<D><<<row_grid(batch_heads, steps), kRows * D / 32, 0, stream>>>(
      q, k, v, out, lse, steps, scale);
  return cudaGetLastError();
}

template <int D>
cudaError_t launch_backward(const float* q, const float* k, const float* v, const float* dout,
                            const float* lse, const float* delta, float* dq, float* dk, float* dv,
                            int64_t batch_heads, int64_t steps, float scale, cudaStream_t stream) {
  attention_backward_dkdv_kernel<D><<<row_grid(batch_heads, steps), kRows * D / 32, 0, stream>>>(
      q, k, v, dout, lse, delta, dk, dv, steps, scale);
  if (const cudaError_t s = cudaGetLastError(); s != cudaSuccess) return s;
  attention_backward_dq_kernel<D><<<row_grid(batch_heads, steps), kRows * D / 32, 0, stream>>>(
      q, k, v, dout, lse, delta, dq, steps, scale);
  return cudaGetLastError();
}

}  // namespace

cudaError_t causal_attention_forward(const float* q, const float* k, const float* v, float* out,
                                     float* lse, int64_t batch_heads, int64_t steps,
                                     int64_t head_dim, float scale, cudaStream_t stream) {
  if (batch_heads <= 0 || steps <= 0) return cudaSuccess;
  if (head_dim == 64)
    return launch_forward<64>(q, k, v, out, lse, batch_heads, steps, scale, stream);
  if (head_dim == 128)
    return launch_forward<128>(q, k, v, out, lse, batch_heads, steps, scale, stream);
  return cudaErrorInvalidValue;
}

cudaError_t causal_attention_backward(const float* q, const float* k, const float* v,
                                      const float* out, const float* dout, const float* lse,
                                      float* delta, float* dq, float* dk, float* dv,
                                      int64_t batch_heads, int64_t steps, int64_t head_dim,
                                      float scale, cudaStream_t stream) {
  if (batch_heads <= 0 || steps <= 0) return cudaSuccess;
  if (head_dim != 64 && head_dim != 128) return cudaErrorInvalidValue;
  const int64_t rows = batch_heads * steps;
  attention_delta_kernel<<<static_cast<unsigned>((rows + 7) / 8), 256, 0, stream>>>(
      out, dout, delta, rows, head_dim);
  if (const cudaError_t s = cudaGetLastError(); s != cudaSuccess) return s;
  return head_dim == 64 ? launch_backward<64>(q, k, v, dout, lse, delta, dq, dk, dv, batch_heads,
                                              steps, scale, stream)
                        : launch_backward<128>(q, k, v, dout, lse, delta, dq, dk, dv, batch_heads,
                                               steps, scale, stream);
}

}  // namespace patchbay::kernels::cuda
