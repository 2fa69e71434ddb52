// CPU twins of normalization.hpp: two-pass statistics and sums in double, one thread.
#pragma once

#include <cstdint>

namespace patchbay::kernels::cuda {

void layer_norm_forward_reference(const float* x, const float* gamma, const float* beta, float* y,
                                  float* mean, float* rstd, int64_t rows, int64_t cols, float eps);
void residual_layer_norm_forward_reference(const float* a, const float* b, const float* gamma,
                                           const float* beta, float* residual_out, float* y,
                                           float* mean, float* rstd, int64_t rows, int64_t cols,
                                           float eps);
void layer_norm_backward_reference(const float* x, const float* gamma, const float* mean,
                                   const float* rstd, const float* dy, const float* dresidual,
                                   float* dx, float* dgamma, float* dbeta, int64_t rows,
                                   int64_t cols);
void rms_norm_forward_reference(const float* x, const float* gamma, float* y, float* rstd,
                                int64_t rows, int64_t cols, float eps);
void rms_norm_backward_reference(const float* x, const float* gamma, const float* rstd,
                                 const float* dy, float* dx, float* dgamma, int64_t rows,
                                 int64_t cols);

}  // namespace patchbay::kernels::cuda
