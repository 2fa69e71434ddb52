// CPU twins of the element-wise kernels (elementwise_reference.hpp).
#include "patchbay/kernels/cuda/elementwise_reference.hpp"

#include "patchbay/kernels/cuda/math/bf16.hpp"

namespace patchbay::kernels::cuda {

void add_f32_reference(const float* a, const float* b, float* out, int64_t count) {
  for (int64_t i = 0; i < count; ++i) out[i] = a[i] + b[i];
}
void multiply_f32_reference(const float* a, const float* b, float* out, int64_t count) {
  for (int64_t i = 0; i < count; ++i) out[i] = a[i] * b[i];
}
void axpby_f32_reference(float alpha, const float* x, float beta, float* y, int64_t count) {
  for (int64_t i = 0; i < count; ++i)
    y[i] = beta == 0.0f ? alpha * x[i]
                        : static_cast<float>(double(alpha) * x[i] + double(beta) * y[i]);
}
void convert_f32_to_bf16_reference(const float* in, uint16_t* out, int64_t count) {
  for (int64_t i = 0; i < count; ++i) out[i] = math::bf16_from_float(in[i]);
}
void convert_bf16_to_f32_reference(const uint16_t* in, float* out, int64_t count) {
  for (int64_t i = 0; i < count; ++i) out[i] = math::float_from_bf16(in[i]);
}

}  // namespace patchbay::kernels::cuda
