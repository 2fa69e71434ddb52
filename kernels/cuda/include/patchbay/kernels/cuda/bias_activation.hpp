// Bias + activation (GELU tanh / GELU erf / ReLU / none), forward and backward, on row-major
// f32 [rows x cols] with a per-column bias [cols] (null: no bias). Formulas: math/gelu.hpp.
// The backward's dbias is a column sum in a fixed order (deterministic, no float atomics).
// CPU twins: bias_activation_reference.hpp.
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>

#include "patchbay/kernels/cuda/math/gelu.hpp"

namespace patchbay::kernels::cuda {

using math::Activation;

// y[r, c] = act(x[r, c] + bias[c]). y may alias x.
cudaError_t bias_activation_forward(Activation kind, const float* x, const float* bias, float* y,
                                    int64_t rows, int64_t cols, cudaStream_t stream);

// dx[r, c] = dy[r, c] * act'(x[r, c] + bias[c]) (x: the forward's input, before the bias);
// dbias[c] = sum_r dx[r, c] when dbias is not null (overwritten). dx may alias dy.
cudaError_t bias_activation_backward(Activation kind, const float* x, const float* bias,
                                     const float* dy, float* dx, float* dbias, int64_t rows,
                                     int64_t cols, cudaStream_t stream);

// out[c] = sum_r in[r, c] in a fixed order (the shared column reduction; overwrites out).
cudaError_t column_sum_f32(const float* in, float* out, int64_t rows, int64_t cols,
                           cudaStream_t stream);

}  // namespace patchbay::kernels::cuda
