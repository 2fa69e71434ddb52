// CPU twins of optimizer_reduce.hpp (the same per-element functions; sums in double).
#pragma once

#include <cstdint>

#include "patchbay/kernels/cuda/math/optimizer_update.hpp"

namespace patchbay::kernels::cuda {

void adamw_step_reference(float* param, const float* grad, float* exp_avg, float* exp_avg_sq,
                          uint16_t* bf16_copy, int64_t count, const math::AdamWScalars& scalars);
void sgd_step_reference(float* param, const float* grad, float* momentum_buffer,
                        uint16_t* bf16_copy, int64_t count, const math::SgdScalars& scalars);
void lion_step_reference(float* param, const float* grad, float* exp_avg, uint16_t* bf16_copy,
                         int64_t count, const math::LionScalars& scalars);
float sum_f32_reference(const float* x, int64_t count);
float sum_squares_f32_reference(const float* x, int64_t count);

}  // namespace patchbay::kernels::cuda
