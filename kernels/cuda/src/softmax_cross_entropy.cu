// Softmax and fused cross-entropy kernels (softmax_cross_entropy.hpp): one 256-thread block
// per row (GPT-2's vocabulary row is 50257 wide: 196 elements per thread), the row's online
// softmax state merged across the block in a fixed order, then a second pass writes the
// output. The row is read twice; at 200 KB it stays in L2 between the passes.
#include "patchbay/kernels/cuda/softmax_cross_entropy.hpp"
#include "reduce.cuh"

namespace patchbay::kernels::cuda {
namespace {

constexpr int kThreads = 256;

__device__ math::SoftmaxState<float> row_softmax_state(const float* row, int64_t cols,
                                                       float* scratch) {
  math::SoftmaxState<float> state;
  for (int64_t c = threadIdx.x; c < cols; c += blockDim.x) state = math::softmax_add(state, row[c]);
  return detail::block_softmax(state, scratch);
}

__global__ void softmax_forward_kernel(const float* x, float* y, int64_t cols) {
  __shared__ float scratch[64];
  const int64_t row = blockIdx.x;
  const float* x_row = x + row * cols;
  const math::SoftmaxState<float> state = row_softmax_state(x_row, cols, scratch);
  const float inverse_sum = 1.0f / state.sum;
  for (int64_t c = threadIdx.x; c < cols; c += blockDim.x)
    y[row * cols + c] = expf(x_row[c] - state.max) * inverse_sum;
}

__global__ void softmax_backward_kernel(const float* y, const float* dy, float* dx, int64_t cols) {
  __shared__ float scratch[32];
  const int64_t row = blockIdx.x;
  float partial = 0.0f;
  for (int64_t c = threadIdx.x; c < cols; c += blockDim.x)
    partial += dy[row * cols + c] * y[row * cols + c];
  const float dot = detail::block_sum(partial, scratch);
  for (int64_t c = threadIdx.x; c < cols; c += blockDim.x)
    dx[row * cols + c] = y[row * cols + c] * (dy[row * cols + c] - dot);
}

__global__ void log_softmax_forward_kernel(const float* x, float* y, int64_t cols) {
  __shared__ float scratch[64];
  const int64_t row = blockIdx.x;
  const float* x_row = x + row * cols;
  const float lse = math::softmax_logsumexp(row_softmax_state(x_row, cols, scratch));
  for (int64_t c = threadIdx.x; c < cols; c += blockDim.x) y[row * cols + c] = x_row[c] - lse;
}

__global__ void log_softmax_backward_kernel(const float* y, const float* dy, float* dx,
                                            int64_t cols) {
  __shared__ float scratch[32];
  const int64_t row = blockIdx.x;
  float partial = 0.0f;
  for (int64_t c = threadIdx.x; c < cols; c += blockDim.x) partial += dy[row * cols + c];
  const float sum = detail::block_sum(partial, scratch);
  for (int64_t c = threadIdx.x; c < cols; c += blockDim.x)
    dx[row * cols + c] = dy[row * cols + c] - expf(y[row * cols + c]) * sum;
}

__global__ void cross_entropy_kernel(const float* logits, const int32_t* targets, float* losses,
                                     float* dlogits, int64_t cols, int32_t ignore_index,
                                     float grad_scale) {
  __shared__ float scratch[64];
  const int64_t row = blockIdx.x;
  const int32_t target = targets[row];
  const float* row_logits = logits + row * cols;
  if (target == ignore_index) {
    if (threadIdx.x == 0) losses[row] = 0.0f;
    if (dlogits != nullptr)
      for (int64_t c = threadIdx.x; c < cols; c += blockDim.x) dlogits[row * cols + c] = 0.0f;
    return;
  }
  const math::SoftmaxState<float> state = row_softmax_state(row_logits, cols, scratch);
  const bool valid = target >= 0 && target < cols;
  const float target_logit = valid ? row_logits[target] : NAN;
  // Every thread has read row_logits[target] before any gradient write may overwrite it
  // (dlogits may alias logits).
  __syncthreads();
  if (threadIdx.x == 0) losses[row] = math::softmax_logsumexp(state) - target_logit;
  if (dlogits == nullptr) return;
  const float inverse_sum = 1.0f / state.sum;
  for (int64_t c = threadIdx.x; c < cols; c += blockDim.x) {
    const float probability = expf(row_logits[c] - state.max) * inverse_sum;
    dlogits[row * cols + c] = (probability - (c == target ? 1.0f : 0.0f)) * grad_scale;
  }
}

// The engine's cross-entropy (cross_entropy_rows_*): one block per row. The forward merges the
// row's online-softmax state and its sum (for the smoothing term's mean) across the block.
template <class Index>
__global__ void cross_entropy_rows_forward_kernel(const float* logits, const Index* targets,
                                                  float* row_loss, float* row_lse, int64_t cols,
                                                  int64_t ignore_index, float smoothing) {
  __shared__ float scratch[64];
  const int64_t row = blockIdx.x;
  const int64_t target = static_cast<int64_t>(targets[row]);
  if (target == ignore_index) {
    if (threadIdx.x == 0) row_loss[row] = row_lse[row] = 0.0f;
    return;
  }
  const float* z = logits + row * cols;
  const float lse = math::softmax_logsumexp(row_softmax_state(z, cols, scratch));
  float partial = 0.0f;
  for (int64_t c = threadIdx.x; c < cols; c += blockDim.x) partial += z[c];
  const float mean = detail::block_sum(partial, scratch) / float(cols);
  if (threadIdx.x != 0) return;
  row_lse[row] = lse;
  // An out-of-range target (recorded by the engine's device-side check) reads nothing: NaN.
  const bool valid = target >= 0 && target < cols;
  row_loss[row] = valid ? (1.0f - smoothing) * (lse - z[target]) + smoothing * (lse - mean) : NAN;
}

template <class Index>
__global__ void cross_entropy_rows_backward_kernel(const float* logits, const Index* targets,
                                                   const float* row_lse, const float* row_grad,
                                                   float* grad_logits, int64_t cols,
                                                   int64_t ignore_index, float smoothing) {
  const int64_t row = blockIdx.x;
  const int64_t target = static_cast<int64_t>(targets[row]);
  float* g = grad_logits + row * cols;
  if (target == ignore_index) {
    for (int64_t c = threadIdx.x; c < cols; c += blockDim.x) g[c] = 0.0f;
    return;
  }
  const float* z = logits + row * cols;
  const float lse = row_lse[row], upstream = row_grad[row];
  const float uniform = smoothing / float(cols), on_target = 1.0f - smoothing;
  for (int64_t c = threadIdx.x; c < cols; c += blockDim.x)
    g[c] = upstream * (expf(z[c] - lse) - (c == target ? on_target : 0.0f) - uniform);
}

template <class Index>
cudaError_t launch_rows_forward(const float* logits, const Index* targets, float* row_loss,
                                float* row_lse, int64_t rows, int64_t cols, int64_t ignore_index,
                                float smoothing, cudaStream_t stream) {
  if (rows <= 0 || cols <= 0) return cudaSuccess;
  cross_entropy_rows_forward_kernel<Index><<<static_cast<unsigned>(rows), kThreads, 0, stream>>>(
      logits, targets, row_loss, row_lse, cols, ignore_index, smoothing);
  return cudaGetLastError();
}

template <class Index>
cudaError_t launch_rows_backward(const float* logits, const Index* targets, const float* row_lse,
                                 const float* row_grad, float* grad_logits, int64_t rows,
                                 int64_t cols, int64_t ignore_index, float smoothing,
                                 cudaStream_t stream) {
  if (rows <= 0 || cols <= 0) return cudaSuccess;
  cross_entropy_rows_backward_kernel<Index><<<static_cast<unsigned>(rows), kThreads, 0, stream>>>(
      logits, targets, row_lse, row_grad, grad_logits, cols, ignore_index, smoothing);
  return cudaGetLastError();
}

}  // namespace

cudaError_t softmax_forward(const float* x, float* y, int64_t rows, int64_t cols,
                            cudaStream_t stream) {
  if (rows <= 0 || cols <= 0) return cudaSuccess;
  softmax_forward_kernel<<<static_cast<unsigned>(rows), kThreads, 0, stream>>>(x, y, cols);
  return cudaGetLastError();
}

cudaError_t softmax_backward(const float* y, const float* dy, float* dx, int64_t rows, int64_t cols,
                             cudaStream_t stream) {
  if (rows <= 0 || cols <= 0) return cudaSuccess;
  softmax_backward_kernel<<<static_cast<unsigned>(rows), kThreads, 0, stream>>>(y, dy, dx, cols);
  return cudaGetLastError();
}

cudaError_t log_softmax_forward(const float* x, float* y, int64_t rows, int64_t cols,
                                cudaStream_t stream) {
  if (rows <= 0 || cols <= 0) return cudaSuccess;
  log_softmax_forward_kernel<<<static_cast<unsigned>(rows), kThreads, 0, stream>>>(x, y, cols);
  return cudaGetLastError();
}

cudaError_t log_softmax_backward(const float* y, const float* dy, float* dx, int64_t rows,
                                 int64_t cols, cudaStream_t stream) {
  if (rows <= 0 || cols <= 0) return cudaSuccess;
  log_softmax_backward_kernel<<<static_cast<unsigned>(rows), kThreads, 0, stream>>>(y, dy, dx,
                                                                                    cols);
  return cudaGetLastError();
}

cudaError_t cross_entropy_forward_backward(const float* logits, const int32_t* targets,
                                           float* losses, float* dlogits, int64_t rows,
                                           int64_t cols, int32_t ignore_index, float grad_scale,
                                           cudaStream_t stream) {
  if (rows <= 0 || cols <= 0) return cudaSuccess;
  cross_entropy_kernel<<<static_cast<unsigned>(rows), kThreads, 0, stream>>>(
      logits, targets, losses, dlogits, cols, ignore_index, grad_scale);
  return cudaGetLastError();
}

cudaError_t cross_entropy_rows_forward(const float* logits, const int32_t* targets, float* row_loss,
                                       float* row_lse, int64_t rows, int64_t cols,
                                       int64_t ignore_index, float smoothing, cudaStream_t stream) {
  return launch_rows_forward(logits, targets, row_loss, row_lse, rows, cols, ignore_index,
                             smoothing, stream);
}
cudaError_t cross_entropy_rows_forward(const float* logits, const int64_t* targets, float* row_loss,
                                       float* row_lse, int64_t rows, int64_t cols,
                                       int64_t ignore_index, float smoothing, cudaStream_t stream) {
  return launch_rows_forward(logits, targets, row_loss, row_lse, rows, cols, ignore_index,
                             smoothing, stream);
}
cudaError_t cross_entropy_rows_backward(const float* logits, const int32_t* targets,
                                        const float* row_lse, const float* row_grad,
                                        float* grad_logits, int64_t rows, int64_t cols,
                                        int64_t ignore_index, float smoothing,
                                        cudaStream_t stream) {
  return launch_rows_backward(logits, targets, row_lse, row_grad, grad_logits, rows, cols,
                              ignore_index, smoothing, stream);
}
cudaError_t cross_entropy_rows_backward(const float* logits, const int64_t* targets,
                                        const float* row_lse, const float* row_grad,
                                        float* grad_logits, int64_t rows, int64_t cols,
                                        int64_t ignore_index, float smoothing,
                                        cudaStream_t stream) {
  return launch_rows_backward(logits, targets, row_lse, row_grad, grad_logits, rows, cols,
                              ignore_index, smoothing, stream);
}

}  // namespace patchbay::kernels::cuda
