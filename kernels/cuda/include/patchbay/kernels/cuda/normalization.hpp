// Layer norm, residual-add layer norm and RMS norm, forward and backward, over the last
// dimension of row-major f32 [rows x cols]. Statistics in f32 by Welford (math/welford.hpp),
// one warp per row; the forward saves per-row mean and rstd = 1/sqrt(var + eps) (population
// variance) for the backward. Parameter gradients (dgamma, dbeta) are column sums in a fixed
// order (deterministic) and are overwritten; dx is overwritten, plus dresidual when given.
// CPU twins: normalization_reference.hpp.
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>

namespace patchbay::kernels::cuda {

// y = (x - mean) * rstd * gamma + beta. beta may be null (no shift). mean, rstd: [rows] out.
cudaError_t layer_norm_forward(const float* x, const float* gamma, const float* beta, float* y,
                               float* mean, float* rstd, int64_t rows, int64_t cols, float eps,
                               cudaStream_t stream);

// residual_out = a + b (the residual stream), then y = layer_norm(residual_out): the pre-norm
// block's "add the sublayer's output, normalise for the next" in one pass.
cudaError_t residual_layer_norm_forward(const float* a, const float* b, const float* gamma,
                                        const float* beta, float* residual_out, float* y,
                                        float* mean, float* rstd, int64_t rows, int64_t cols,
                                        float eps, cudaStream_t stream);

// dx = rstd * (dy*gamma - mean(dy*gamma) - xhat * mean(dy*gamma*xhat)) [+ dresidual];
// dgamma = sum_rows dy * xhat; dbeta = sum_rows dy (each skipped when null).
// x: the forward's input (residual_out for the residual form). dresidual may be null.
cudaError_t layer_norm_backward(const float* x, const float* gamma, const float* mean,
                                const float* rstd, const float* dy, const float* dresidual,
                                float* dx, float* dgamma, float* dbeta, int64_t rows, int64_t cols,
                                cudaStream_t stream);

// y = x * rstd * gamma, rstd = 1/sqrt(mean(x^2) + eps). rstd: [rows] out.
cudaError_t rms_norm_forward(const float* x, const float* gamma, float* y, float* rstd,
                             int64_t rows, int64_t cols, float eps, cudaStream_t stream);

// dx = rstd * (dy*gamma - xhat * mean(dy*gamma*xhat)); dgamma = sum_rows dy * xhat.
cudaError_t rms_norm_backward(const float* x, const float* gamma, const float* rstd,
                              const float* dy, float* dx, float* dgamma, int64_t rows, int64_t cols,
                              cudaStream_t stream);

}  // namespace patchbay::kernels::cuda
