// Norm kernels (normalization.hpp). Row kernels: one warp per row (8 rows per 256-thread
// block), each lane striding the row by 32 (coalesced), statistics merged with warp shuffles
// (Welford for layer norm, a plain sum of squares for RMS norm). Parameter gradients: blocks
// of 32 columns x 32 row-lanes, partials summed in lane order (as column_sum_f32), so they are
// deterministic. Rows are read twice or three times; at GPT-2's 768 columns a row (3 KB) stays
// in L1 between passes.
#include "launch.cuh"
#include "patchbay/kernels/cuda/normalization.hpp"
#include "reduce.cuh"

namespace patchbay::kernels::cuda {
namespace {

constexpr int kRowsPerBlock = 8;

__device__ __forceinline__ int64_t warp_row() {
  return int64_t(blockIdx.x) * kRowsPerBlock + threadIdx.x / 32;
}

unsigned row_blocks(int64_t rows) {
  return static_cast<unsigned>((rows + kRowsPerBlock - 1) / kRowsPerBlock);
}

// kResidual: a + b is the row (residual form, stored to residual_out); otherwise a is the row.
template <bool kResidual>
__global__ void layer_norm_forward_kernel(const float* a, const float* b, const float* gamma,
                                          const float* beta, float* residual_out, float* y,
                                          float* mean_out, float* rstd_out, int64_t rows,
                                          int64_t cols, float eps) {
  const int64_t row = warp_row();
  if (row >= rows) return;
  const int lane = threadIdx.x % 32;
  const float* a_row = a + row * cols;
  math::WelfordState<float> stats;
  for (int64_t c = lane; c < cols; c += 32) {
    float v = a_row[c];
    if constexpr (kResidual) {
      v += b[row * cols + c];
      residual_out[row * cols + c] = v;
    }
    stats = math::welford_add(stats, v);
  }
  stats = detail::warp_welford(stats);
  const float mean = stats.mean;
  const float rstd = rsqrtf(math::welford_variance(stats) + eps);
  const float* x_row = kResidual ? residual_out + row * cols : a_row;
  // (each lane reads back only the residual_out columns it wrote itself: no sync needed)
  for (int64_t c = lane; c < cols; c += 32) {
    const float normalised = (x_row[c] - mean) * rstd;
    y[row * cols + c] = normalised * gamma[c] + (beta != nullptr ? beta[c] : 0.0f);
  }
  if (lane == 0) {
    mean_out[row] = mean;
    rstd_out[row] = rstd;
  }
}

// kRms: mean is absent (0) and only the xhat term is removed.
template <bool kRms>
__global__ void norm_backward_dx_kernel(const float* x, const float* gamma, const float* mean,
                                        const float* rstd, const float* dy, const float* dresidual,
                                        float* dx, int64_t rows, int64_t cols) {
  const int64_t row = warp_row();
  if (row >= rows) return;
  const int lane = threadIdx.x % 32;
  const float mu = kRms ? 0.0f : mean[row];
  const float r = rstd[row];
  const float* x_row = x + row * cols;
  const float* dy_row = dy + row * cols;
  float sum_g = 0.0f, sum_gx = 0.0f;
  for (int64_t c = lane; c < cols; c += 32) {
    const float g = dy_row[c] * gamma[c];
    sum_g += g;
    sum_gx += g * (x_row[c] - mu) * r;
  }
  const float mean_g = kRms ? 0.0f : detail::warp_sum(sum_g) / float(cols);
  const float mean_gx = detail::warp_sum(sum_gx) / float(cols);
  for (int64_t c = lane; c < cols; c += 32) {
    const float xhat = (x_row[c] - mu) * r;
    float d = r * (dy_row[c] * gamma[c] - mean_g - xhat * mean_gx);
    if (dresidual != nullptr) d += dresidual[row * cols + c];
    dx[row * cols + c] = d;
  }
}

// dgamma[c] = sum_r dy * xhat, dbeta[c] = sum_r dy; block (32 columns) x (32 row-lanes).
__global__ void norm_param_grad_kernel(const float* x, const float* mean, const float* rstd,
                                       const float* dy, float* dgamma, float* dbeta, int64_t rows,
                                       int64_t cols) {
  __shared__ float partial_gamma[32][33];
  __shared__ float partial_beta[32][33];
  const int64_t column = int64_t(blockIdx.x) * 32 + threadIdx.x;
  float sum_gamma = 0.0f, sum_beta = 0.0f;
  if (column < cols)
    for (int64_t r = threadIdx.y; r < rows; r += 32) {
      const float g = dy[r * cols + column];
      const float mu = mean != nullptr ? mean[r] : 0.0f;
      sum_gamma += g * (x[r * cols + column] - mu) * rstd[r];
      sum_beta += g;
    }
  partial_gamma[threadIdx.y][threadIdx.x] = sum_gamma;
  partial_beta[threadIdx.y][threadIdx.x] = sum_beta;
  __syncthreads();
  if (threadIdx.y == 0 && column < cols) {
    float total_gamma = 0.0f, total_beta = 0.0f;
    for (int lane = 0; lane < 32; ++lane) {
      total_gamma += partial_gamma[lane][threadIdx.x];
      total_beta += partial_beta[lane][threadIdx.x];
    }
    if (dgamma != nullptr) dgamma[column] = total_gamma;
    if (dbeta != nullptr) dbeta[column] = total_beta;
  }
}

__global__ void rms_norm_forward_kernel(const float* x, const float* gamma, float* y,
                                        float* rstd_out, int64_t rows, int64_t cols, float eps) {
  const int64_t row = warp_row();
  if (row >= rows) return;
  const int lane = threadIdx.x % 32;
  const float* x_row = x + row * cols;
  float sum_squares = 0.0f;
  for (int64_t c = lane; c < cols; c += 32) sum_squares += x_row[c] * x_row[c];
  const float rstd = rsqrtf(detail::warp_sum(sum_squares) / float(cols) + eps);
  for (int64_t c = lane; c < cols; c += 32) y[row * cols + c] = x_row[c] * rstd * gamma[c];
  if (lane == 0) rstd_out[row] = rstd;
}

cudaError_t param_grads(const float* x, const float* mean, const float* rstd, const float* dy,
                        float* dgamma, float* dbeta, int64_t rows, int64_t cols,
                        cudaStream_t stream) {
  if (dgamma == nullptr && dbeta == nullptr) return cudaSuccess;
  norm_param_grad_kernel<<<static_cast<unsigned>((cols + 31) / 32), dim3(32, 32), 0, stream>>>(
      x, mean, rstd, dy, dgamma, dbeta, rows, cols);
  return cudaGetLastError();
}

}  // namespace

cudaError_t layer_norm_forward(const float* x, const float* gamma, const float* beta, float* y,
                               float* mean, float* rstd, int64_t rows, int64_t cols, float eps,
                               cudaStream_t stream) {
  if (rows <= 0 || cols <= 0) return cudaSuccess;
  layer_norm_forward_kernel<false><<<row_blocks(rows), 32 * kRowsPerBlock, 0, stream>>>(
      x, nullptr, gamma, beta, nullptr, y, mean, rstd, rows, cols, eps);
  return cudaGetLastError();
}

cudaError_t residual_layer_norm_forward(const float* a, const float* b, const float* gamma,
                                        const float* beta, float* residual_out, float* y,
                                        float* mean, float* rstd, int64_t rows, int64_t cols,
                                        float eps, cudaStream_t stream) {
  if (rows <= 0 || cols <= 0) return cudaSuccess;
  layer_norm_forward_kernel<true><<<row_blocks(rows), 32 * kRowsPerBlock, 0, stream>>>(
      a, b, gamma, beta, residual_out, y, mean, rstd, rows, cols, eps);
  return cudaGetLastError();
}

cudaError_t layer_norm_backward(const float* x, const float* gamma, const float* mean,
                                const float* rstd, const float* dy, const float* dresidual,
                                float* dx, float* dgamma, float* dbeta, int64_t rows, int64_t cols,
                                cudaStream_t stream) {
  if (rows <= 0 || cols <= 0) return cudaSuccess;
  // The parameter gradients read dy before dx is written: dx may alias dy.
  if (const cudaError_t s = param_grads(x, mean, rstd, dy, dgamma, dbeta, rows, cols, stream);
      s != cudaSuccess)
    return s;
  norm_backward_dx_kernel<false><<<row_blocks(rows), 32 * kRowsPerBlock, 0, stream>>>(
      x, gamma, mean, rstd, dy, dresidual, dx, rows, cols);
  return cudaGetLastError();
}

cudaError_t rms_norm_forward(const float* x, const float* gamma, float* y, float* rstd,
                             int64_t rows, int64_t cols, float eps, cudaStream_t stream) {
  if (rows <= 0 || cols <= 0) return cudaSuccess;
  rms_norm_forward_kernel<<<row_blocks(rows), 32 * kRowsPerBlock, 0, stream>>>(x, gamma, y, rstd,
                                                                               rows, cols, eps);
  return cudaGetLastError();
}

cudaError_t rms_norm_backward(const float* x, const float* gamma, const float* rstd,
                              const float* dy, float* dx, float* dgamma, int64_t rows, int64_t cols,
                              cudaStream_t stream) {
  if (rows <= 0 || cols <= 0) return cudaSuccess;
  if (const cudaError_t s = param_grads(x, nullptr, rstd, dy, dgamma, nullptr, rows, cols, stream);
      s != cudaSuccess)
    return s;
  norm_backward_dx_kernel<true><<<row_blocks(rows), 32 * kRowsPerBlock, 0, stream>>>(
      x, gamma, nullptr, rstd, dy, nullptr, dx, rows, cols);
  return cudaGetLastError();
}

}  // namespace patchbay::kernels::cuda
