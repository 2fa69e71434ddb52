// Fused optimizer updates and reductions (optimizer_reduce.hpp). Updates: grid-stride loops,
// one element per thread per step (memory-bound: AdamW moves 16-18 bytes per parameter).
// Reductions: kReduceBlocks blocks of 256 threads, each a strided partial sum in a fixed
// order, written to workspace; then one block sums the partials. No float atomics.
#include "launch.cuh"
#include "patchbay/kernels/cuda/math/bf16.hpp"
#include "patchbay/kernels/cuda/optimizer_reduce.hpp"
#include "reduce.cuh"

namespace patchbay::kernels::cuda {
namespace {

constexpr int kThreads = 256;
constexpr int kReduceBlocks = 528;  // 4 per SM of an H100 SXM (132 SMs)
static_assert(kReduceBlocks <= kReduceWorkspaceFloats);

__global__ void adamw_kernel(float* param, const float* grad, float* exp_avg, float* exp_avg_sq,
                             uint16_t* bf16_copy, int64_t count, math::AdamWScalars c) {
  const int64_t stride = int64_t(gridDim.x) * blockDim.x;
  for (int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; i < count; i += stride) {
    float p = param[i], m = exp_avg[i], v = exp_avg_sq[i];
    math::adamw_update(p, grad[i], m, v, c);
    param[i] = p;
    exp_avg[i] = m;
    exp_avg_sq[i] = v;
    if (bf16_copy != nullptr) bf16_copy[i] = math::bf16_from_float(p);
  }
}

__global__ void sgd_kernel(float* param, const float* grad, float* momentum_buffer,
                           uint16_t* bf16_copy, int64_t count, math::SgdScalars c) {
  const int64_t stride = int64_t(gridDim.x) * blockDim.x;
  for (int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; i < count; i += stride) {
    float p = param[i], buffer = c.use_momentum ? momentum_buffer[i] : 0.0f;
    math::sgd_update(p, grad[i], buffer, c);
    param[i] = p;
    if (c.use_momentum) momentum_buffer[i] = buffer;
    if (bf16_copy != nullptr) bf16_copy[i] = math::bf16_from_float(p);
  }
}

__global__ void lion_kernel(float* param, const float* grad, float* exp_avg, uint16_t* bf16_copy,
                            int64_t count, math::LionScalars c) {
  const int64_t stride = int64_t(gridDim.x) * blockDim.x;
  for (int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; i < count; i += stride) {
    float p = param[i], m = exp_avg[i];
    math::lion_update(p, grad[i], m, c);
    param[i] = p;
    exp_avg[i] = m;
    if (bf16_copy != nullptr) bf16_copy[i] = math::bf16_from_float(p);
  }
}

template <bool kSquares>
__global__ void partial_sum_kernel(const float* x, int64_t count, float* partials) {
  __shared__ float scratch[32];
  const int64_t stride = int64_t(gridDim.x) * blockDim.x;
  float sum = 0.0f;
  for (int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; i < count; i += stride)
    sum += kSquares ? x[i] * x[i] : x[i];
  sum = detail::block_sum(sum, scratch);
  if (threadIdx.x == 0) partials[blockIdx.x] = sum;
}

__global__ void final_sum_kernel(const float* partials, int count, float* result) {
  __shared__ float scratch[32];
  float sum = 0.0f;
  for (int i = threadIdx.x; i < count; i += blockDim.x) sum += partials[i];
  sum = detail::block_sum(sum, scratch);
  if (threadIdx.x == 0) *result = sum;
}

template <bool kSquares>
cudaError_t launch_sum(const float* x, int64_t count, float* result, float* workspace,
                       cudaStream_t stream) {
  partial_sum_kernel<kSquares><<<kReduceBlocks, kThreads, 0, stream>>>(x, count, workspace);
  if (const cudaError_t s = cudaGetLastError(); s != cudaSuccess) return s;
  final_sum_kernel<<<1, 1024, 0, stream>>>(workspace, kReduceBlocks, result);
  return cudaGetLastError();
}

}  // namespace

cudaError_t adamw_step(float* param, const float* grad, float* exp_avg, float* exp_avg_sq,
                       uint16_t* bf16_copy, int64_t count, const math::AdamWScalars& scalars,
                       cudaStream_t stream) {
  if (count <= 0) return cudaSuccess;
  adamw_kernel<<<detail::grid_stride_blocks(count, kThreads), kThreads, 0, stream>>>(
      param, grad, exp_avg, exp_avg_sq, bf16_copy, count, scalars);
  return cudaGetLastError();
}

cudaError_t sgd_step(float* param, const float* grad, float* momentum_buffer, uint16_t* bf16_copy,
                     int64_t count, const math::SgdScalars& scalars, cudaStream_t stream) {
  if (count <= 0) return cudaSuccess;
  sgd_kernel<<<detail::grid_stride_blocks(count, kThreads), kThreads, 0, stream>>>(
      param, grad, momentum_buffer, bf16_copy, count, scalars);
  return cudaGetLastError();
}

cudaError_t lion_step(float* param, const float* grad, float* exp_avg, uint16_t* bf16_copy,
                      int64_t count, const math::LionScalars& scalars, cudaStream_t stream) {
  if (count <= 0) return cudaSuccess;
  lion_kernel<<<detail::grid_stride_blocks(count, kThreads), kThreads, 0, stream>>>(
      param, grad, exp_avg, bf16_copy, count, scalars);
  return cudaGetLastError();
}

cudaError_t sum_f32(const float* x, int64_t count, float* result, float* workspace,
                    cudaStream_t stream) {
  return launch_sum<false>(x, count, result, workspace, stream);
}

cudaError_t sum_squares_f32(const float* x, int64_t count, float* result, float* workspace,
                            cudaStream_t stream) {
  return launch_sum<true>(x, count, result, workspace, stream);
}

}  // namespace patchbay::kernels::cuda
