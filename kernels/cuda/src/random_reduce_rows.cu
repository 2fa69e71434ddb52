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

__global__ void reduce_rows_kernel(RowReduction reduction, const float* in, float* out,
                                   int64_t cols) {
  __shared__ float scratch[32];
  const float* row = in + int64_t(blockIdx.x) * cols;
  if (reduction == RowReduction::kMax) {
    float value = -INFINITY;
    for (int64_t c = threadIdx.x; c < cols; c += blockDim.x)
      value = row[c] != row[c] || value != value ? NAN : fmaxf(value, row[c]);  // NaN wins
    // Block max through the shared scratch (warp maxima, then warp 0).
    value = detail::warp_max(value);
    if (threadIdx.x % 32 == 0) scratch[threadIdx.x / 32] = value;
    __syncthreads();
    if (threadIdx.x < 32) {
      value = threadIdx.x < blockDim.x / 32 ? scratch[threadIdx.x] : -INFINITY;
      value = detail::warp_max(value);
      if (threadIdx.x == 0) out[blockIdx.x] = value;
    }
    return;
  }
  float sum = 0.0f;
  for (int64_t c = threadIdx.x; c < cols; c += blockDim.x) sum += row[c];
  sum = detail::block_sum(sum, scratch);
  if (threadIdx.x == 0)
    out[blockIdx.x] = reduction == RowReduction::kMean ? sum / float(cols) : sum;
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

cudaError_t reduce_rows_f32(RowReduction reduction, const float* in, float* out, int64_t rows,
                            int64_t cols, cudaStream_t stream) {
  if (rows <= 0) return cudaSuccess;
  if (cols <= 0) return cudaErrorInvalidValue;
  reduce_rows_kernel<<<static_cast<unsigned>(rows), kThreads, 0, stream>>>(reduction, in, out,
                                                                           cols);
  return cudaGetLastError();
}

}  // namespace patchbay::kernels::cuda
