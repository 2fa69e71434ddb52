// Fused optimizer updates (AdamW, SGD, Lion: one pass over parameter, gradient and state, the
// per-element arithmetic of math/optimizer_update.hpp, i.e. the CPU plugins'), and the
// reductions a training step needs (sum, sum of squares for gradient-norm clipping), all f32.
// CPU twins: optimizer_reduce_reference.hpp.
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>

#include "patchbay/kernels/cuda/math/optimizer_update.hpp"

namespace patchbay::kernels::cuda {

// Updates param, exp_avg, exp_avg_sq in place; when bf16_copy is not null also writes the new
// parameters rounded to bf16 (the mixed-precision working copy), saving a second pass.
cudaError_t adamw_step(float* param, const float* grad, float* exp_avg, float* exp_avg_sq,
                       uint16_t* bf16_copy, int64_t count, const math::AdamWScalars& scalars,
                       cudaStream_t stream);
// momentum_buffer may be null when scalars.use_momentum is 0.
cudaError_t sgd_step(float* param, const float* grad, float* momentum_buffer, uint16_t* bf16_copy,
                     int64_t count, const math::SgdScalars& scalars, cudaStream_t stream);
cudaError_t lion_step(float* param, const float* grad, float* exp_avg, uint16_t* bf16_copy,
                      int64_t count, const math::LionScalars& scalars, cudaStream_t stream);

// Floats of device workspace the reductions need (partial sums of a fixed grid).
constexpr int64_t kReduceWorkspaceFloats = 1024;

// *result = sum of x (or of x^2), in a fixed order: a fixed grid of blocks writes partials to
// workspace, one block adds them; the same input gives the same bits every run. result and
// workspace are device memory; nothing is read back to the host.
cudaError_t sum_f32(const float* x, int64_t count, float* result, float* workspace,
                    cudaStream_t stream);
cudaError_t sum_squares_f32(const float* x, int64_t count, float* result, float* workspace,
                            cudaStream_t stream);

}  // namespace patchbay::kernels::cuda
