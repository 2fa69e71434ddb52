// CPU twins of the fused optimizer updates and reductions (optimizer_reduce_reference.hpp).
#include "patchbay/kernels/cuda/optimizer_reduce_reference.hpp"

#include "patchbay/kernels/cuda/math/bf16.hpp"

namespace patchbay::kernels::cuda {

void adamw_step_reference(float* param, const float* grad, float* exp_avg, float* exp_avg_sq,
                          uint16_t* bf16_copy, int64_t count, const math::AdamWScalars& scalars) {
  for (int64_t i = 0; i < count; ++i) {
    math::adamw_update(param[i], grad[i], exp_avg[i], exp_avg_sq[i], scalars);
    if (bf16_copy != nullptr) bf16_copy[i] = math::bf16_from_float(param[i]);
  }
}

void sgd_step_reference(float* param, const float* grad, float* momentum_buffer,
                        uint16_t* bf16_copy, int64_t count, const math::SgdScalars& scalars) {
  for (int64_t i = 0; i < count; ++i) {
    float unused = 0.0f;
    math::sgd_update(param[i], grad[i], scalars.use_momentum ? momentum_buffer[i] : unused,
                     scalars);
    if (bf16_copy != nullptr) bf16_copy[i] = math::bf16_from_float(param[i]);
  }
}

void lion_step_reference(float* param, const float* grad, float* exp_avg, uint16_t* bf16_copy,
                         int64_t count, const math::LionScalars& scalars) {
  for (int64_t i = 0; i < count; ++i) {
    math::lion_update(param[i], grad[i], exp_avg[i], scalars);
    if (bf16_copy != nullptr) bf16_copy[i] = math::bf16_from_float(param[i]);
  }
}

float sum_f32_reference(const float* x, int64_t count) {
  double sum = 0.0;
  for (int64_t i = 0; i < count; ++i) sum += x[i];
  return static_cast<float>(sum);
}

float sum_squares_f32_reference(const float* x, int64_t count) {
  double sum = 0.0;
  for (int64_t i = 0; i < count; ++i) sum += double(x[i]) * x[i];
  return static_cast<float>(sum);
}

}  // namespace patchbay::kernels::cuda
