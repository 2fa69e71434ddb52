// Random fills, dropout masks and row reductions (random_reduce_rows.hpp). The fill is a
// grid-stride loop over counter blocks (one Philox call gives 4 values, as on the CPU); the
// row reductions one 256-thread block per row.
#include <cmath>

#include "launch.cuh"
#include "patchbay/kernels/cuda/math/philox.hpp"
#include "patchbay/kernels/cuda/random_reduce_rows.hpp"
#include "reduce.cuh"

namespace patchbay::kernels::cuda {
namespace {

constexpr int kThreads = 256;

// One thread per counter block (4 values).
__global__ void random_fill_kernel(float* out, int64_t count, uint64_t first_block, uint64_t seed,
                                   bool normal, double low, double high) {
  const int64_t blocks = (count + 3) / 4;
  const int64_t stride = int64_t(gridDim.x) * blockDim.x;
  for (int64_t b = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; b < blocks; b += stride) {
    float values[4];
    math::engine_random_block(seed, first_block + uint64_t(b), normal, low, high, values);
#pragma unroll
    for (int j = 0; j < 4; ++j)
      if (b * 4 + j < count) out[b * 4 + j] = values[j];
  }
}

__global__ void dropout_kernel(const float* u, float p, float keep_scale, float* keep,
                               int64_t count) {
  const int64_t stride = int64_t(gridDim.x) * blockDim.x;
  for (int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; i < count; i += stride)
    keep[i] = u[i] >= p ? keep_scale : 0.0f;
}

// Is (value, index) a better maximum than (best, best_index)? NaN beats numbers; among equals
// (or NaNs) the lower index wins: the engine's "first maximal element, NaN wins" rule.
__device__ __forceinline__ bool better_max(float value, int64_t index, float best,
                                           int64_t best_index) {
  const bool value_nan = value != value, best_nan = best != best;
  if (value_nan != best_nan) return value_nan;
  if (value_nan || value == best) return index < best_index;
  return value > best;
}

__global__ void reduce_rows_kernel(RowReduction reduction, const float* in, float* out,
                                   int64_t* argmax, int64_t cols) {
  __shared__ float scratch[32];
  __shared__ float best_values[32];
  __shared__ int64_t best_indices[32];
  const float* row = in + int64_t(blockIdx.x) * cols;
  if (reduction == RowReduction::kMax) {
    float best = -INFINITY;
    int64_t best_index = INT64_MAX;
    for (int64_t c = threadIdx.x; c < cols; c += blockDim.x)
      if (better_max(row[c], c, best, best_index)) {
        best = row[c];
        best_index = c;
      }
    for (int offset = 16; offset > 0; offset /= 2) {
      const float other = __shfl_xor_sync(detail::kFullMask, best, offset);
      const int64_t other_index = __shfl_xor_sync(detail::kFullMask, best_index, offset);
      if (better_max(other, other_index, best, best_index)) {
        best = other;
        best_index = other_index;
      }
    }
    if (threadIdx.x % 32 == 0) {
      best_values[threadIdx.x / 32] = best;
      best_indices[threadIdx.x / 32] = best_index;
    }
    __syncthreads();
    if (threadIdx.x == 0) {
      for (int w = 1; w < int(blockDim.x / 32); ++w)
        if (better_max(best_values[w], best_indices[w], best, best_index)) {
          best = best_values[w];
          best_index = best_indices[w];
        }
      out[blockIdx.x] = best;
      if (argmax != nullptr) argmax[blockIdx.x] = best_index;
    }
    return;
  }
  float sum = 0.0f;
  for (int64_t c = threadIdx.x; c < cols; c += blockDim.x) sum += row[c];
  sum = detail::block_sum(sum, scratch);
  if (threadIdx.x == 0)
    out[blockIdx.x] = reduction == RowReduction::kMean ? sum / float(cols) : sum;
}

__global__ void max_backward_kernel(const float* dy, const int64_t* argmax, float* dx, int64_t rows,
                                    int64_t cols) {
  const int64_t count = rows * cols;
  const int64_t stride = int64_t(gridDim.x) * blockDim.x;
  for (int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; i < count; i += stride) {
    const int64_t r = i / cols;
    dx[i] = i % cols == argmax[r] ? dy[r] : 0.0f;
  }
}

}  // namespace

cudaError_t random_fill_f32(float* out, int64_t count, uint64_t first_block, uint64_t seed,
                            bool normal, double low, double high, cudaStream_t stream) {
  if (count <= 0) return cudaSuccess;
  const int64_t blocks = (count + 3) / 4;
  random_fill_kernel<<<detail::grid_stride_blocks(blocks, kThreads), kThreads, 0, stream>>>(
      out, count, first_block, seed, normal, low, high);
  return cudaGetLastError();
}

cudaError_t dropout_mask_f32(const float* u, double p, float* keep, int64_t count,
                             cudaStream_t stream) {
  if (!(p >= 0.0 && p < 1.0)) return cudaErrorInvalidValue;
  if (count <= 0) return cudaSuccess;
  dropout_kernel<<<detail::grid_stride_blocks(count, kThreads), kThreads, 0, stream>>>(
      u, static_cast<float>(p), static_cast<float>(1.0 / (1.0 - p)), keep, count);
  return cudaGetLastError();
}

cudaError_t reduce_rows_f32(RowReduction reduction, const float* in, float* out, int64_t* argmax,
                            int64_t rows, int64_t cols, cudaStream_t stream) {
  if (rows <= 0) return cudaSuccess;
  if (cols <= 0) return cudaErrorInvalidValue;
  reduce_rows_kernel<<<static_cast<unsigned>(rows), kThreads, 0, stream>>>(reduction, in, out,
                                                                           argmax, cols);
  return cudaGetLastError();
}

cudaError_t max_rows_backward_f32(const float* dy, const int64_t* argmax, float* dx, int64_t rows,
                                  int64_t cols, cudaStream_t stream) {
  if (rows <= 0 || cols <= 0) return cudaSuccess;
  max_backward_kernel<<<detail::grid_stride_blocks(rows * cols, kThreads), kThreads, 0, stream>>>(
      dy, argmax, dx, rows, cols);
  return cudaGetLastError();
}

}  // namespace patchbay::kernels::cuda
