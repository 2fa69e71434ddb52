// CPU twins of bias_activation.hpp, in double (kernels/cpu's reference formulas).
#pragma once

#include <cstdint>

#include "patchbay/kernels/cuda/math/gelu.hpp"

namespace patchbay::kernels::cuda {

void bias_activation_forward_reference(math::Activation kind, const float* x, const float* bias,
                                       float* y, int64_t rows, int64_t cols);
void bias_activation_backward_reference(math::Activation kind, const float* x, const float* bias,
                                        const float* dy, float* dx, float* dbias, int64_t rows,
                                        int64_t cols);
void column_sum_f32_reference(const float* in, float* out, int64_t rows, int64_t cols);

}  // namespace patchbay::kernels::cuda
