// Bias + activation kernels (bias_activation.hpp). Forward and dx: grid-stride element loops
// (column = i % cols). dbias and column_sum_f32: one block per 32 columns, 32 row-lanes per
// block each summing a strided set of rows, then the 32 partials summed in lane order in
// shared memory: a fixed order, so the same inputs give the same bits every run.
#include "launch.cuh"
#include "patchbay/kernels/cuda/bias_activation.hpp"

namespace patchbay::kernels::cuda {
namespace {

constexpr int kThreads = 256;

__global__ void bias_activation_forward_kernel(Activation kind, const float* x, const float* bias,
                                               float* y, int64_t count, int64_t cols) {
  const int64_t stride = int64_t(gridDim.x) * blockDim.x;
  for (int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; i < count; i += stride) {
    const float z = bias != nullptr ? x[i] + bias[i % cols] : x[i];
    y[i] = math::activate(kind, z);
  }
}

__global__ void bias_activation_backward_kernel(Activation kind, const float* x, const float* bias,
                                                const float* dy, float* dx, int64_t count,
                                                int64_t cols) {
  const int64_t stride = int64_t(gridDim.x) * blockDim.x;
  for (int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; i < count; i += stride) {
    const float z = bias != nullptr ? x[i] + bias[i % cols] : x[i];
    dx[i] = dy[i] * math::activate_derivative(kind, z);
  }
}

// Block (32 columns) x (32 row-lanes); grid.x = ceil(cols / 32).
__global__ void column_sum_kernel(const float* in, float* out, int64_t rows, int64_t cols) {
  __shared__ float partial[32][33];  // +1: no bank conflicts on the transposed read
  const int64_t column = int64_t(blockIdx.x) * 32 + threadIdx.x;
  float sum = 0.0f;
  if (column < cols)
    for (int64_t r = threadIdx.y; r < rows; r += 32) sum += in[r * cols + column];
  partial[threadIdx.y][threadIdx.x] = sum;
  __syncthreads();
  if (threadIdx.y == 0 && column < cols) {
    float total = 0.0f;
    for (int lane = 0; lane < 32; ++lane) total += partial[lane][threadIdx.x];
    out[column] = total;
  }
}

}  // namespace

cudaError_t column_sum_f32(const float* in, float* out, int64_t rows, int64_t cols,
                           cudaStream_t stream) {
  if (cols <= 0) return cudaSuccess;
  column_sum_kernel<<<static_cast<unsigned>((cols + 31) / 32), dim3(32, 32), 0, stream>>>(
      in, out, rows, cols);
  return cudaGetLastError();
}

cudaError_t bias_activation_forward(Activation kind, const float* x, const float* bias, float* y,
                                    int64_t rows, int64_t cols, cudaStream_t stream) {
  const int64_t count = rows * cols;
  if (count <= 0) return cudaSuccess;
  bias_activation_forward_kernel<<<detail::grid_stride_blocks(count, kThreads), kThreads, 0,
                                   stream>>>(kind, x, bias, y, count, cols);
  return cudaGetLastError();
}

cudaError_t bias_activation_backward(Activation kind, const float* x, const float* bias,
                                     const float* dy, float* dx, float* dbias, int64_t rows,
                                     int64_t cols, cudaStream_t stream) {
  const int64_t count = rows * cols;
  if (count <= 0) return cudaSuccess;
  bias_activation_backward_kernel<<<detail::grid_stride_blocks(count, kThreads), kThreads, 0,
                                    stream>>>(kind, x, bias, dy, dx, count, cols);
  if (const cudaError_t status = cudaGetLastError(); status != cudaSuccess) return status;
  return dbias != nullptr ? column_sum_f32(dx, dbias, rows, cols, stream) : cudaSuccess;
}

}  // namespace patchbay::kernels::cuda
