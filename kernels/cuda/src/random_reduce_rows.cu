// Philox fills, dropout masks and row reductions (random_reduce_rows.hpp). The fills are
// grid-stride loops, one Philox block per element (4 words drawn, 1-3 used: simple, and the
// CPU twin draws the same); the row reductions one 256-thread block per row.
#include <cmath>

#include "launch.cuh"
#include "patchbay/kernels/cuda/math/philox.hpp"
#include "patchbay/kernels/cuda/random_reduce_rows.hpp"
#include "reduce.cuh"

namespace patchbay::kernels::cuda {
namespace {

constexpr int kThreads = 256;

__global__ void uniform_kernel(float* out, int64_t count, uint64_t seed, uint64_t offset, float low,
                               float span) {
  const int64_t stride = int64_t(gridDim.x) * blockDim.x;
  for (int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; i < count; i += stride)
    out[i] =
        low + span * math::uniform_from_bits(math::philox_draw(seed, offset, uint64_t(i)).word[0]);
}

__global__ void normal_kernel(float* out, int64_t count, uint64_t seed, uint64_t offset, float mean,
                              float stddev) {
  const int64_t stride = int64_t(gridDim.x) * blockDim.x;
  for (int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; i < count; i += stride) {
    const math::PhiloxBlock draw = math::philox_draw(seed, offset, uint64_t(i));
    out[i] = mean + stddev * math::normal_from_bits(draw.word[0], draw.word[1]);
  }
}

__global__ void dropout_kernel(float* mask, int64_t count, float p, float keep_scale, uint64_t seed,
                               uint64_t offset) {
  const int64_t stride = int64_t(gridDim.x) * blockDim.x;
  for (int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; i < count; i += stride) {
    const float u = math::uniform_from_bits(math::philox_draw(seed, offset, uint64_t(i)).word[2]);
    mask[i] = u >= p ? keep_scale : 0.0f;
  }
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

cudaError_t random_uniform_f32(float* out, int64_t count, uint64_t seed, uint64_t offset, float low,
                               float high, cudaStream_t stream) {
  if (count <= 0) return cudaSuccess;
  uniform_kernel<<<detail::grid_stride_blocks(count, kThreads), kThreads, 0, stream>>>(
      out, count, seed, offset, low, high - low);
  return cudaGetLastError();
}

cudaError_t random_normal_f32(float* out, int64_t count, uint64_t seed, uint64_t offset, float mean,
                              float stddev, cudaStream_t stream) {
  if (count <= 0) return cudaSuccess;
  normal_kernel<<<detail::grid_stride_blocks(count, kThreads), kThreads, 0, stream>>>(
      out, count, seed, offset, mean, stddev);
  return cudaGetLastError();
}

cudaError_t dropout_mask_f32(float* mask, int64_t count, float p, uint64_t seed, uint64_t offset,
                             cudaStream_t stream) {
  if (!(p >= 0.0f && p < 1.0f)) return cudaErrorInvalidValue;
  if (count <= 0) return cudaSuccess;
  dropout_kernel<<<detail::grid_stride_blocks(count, kThreads), kThreads, 0, stream>>>(
      mask, count, p, 1.0f / (1.0f - p), seed, offset);
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
