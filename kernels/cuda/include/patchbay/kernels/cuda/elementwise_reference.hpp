// CPU twins of elementwise.hpp: plain loops, one thread, the same rounding.
#pragma once

#include <cstdint>

namespace patchbay::kernels::cuda {

void add_f32_reference(const float* a, const float* b, float* out, int64_t count);
void multiply_f32_reference(const float* a, const float* b, float* out, int64_t count);
void axpby_f32_reference(float alpha, const float* x, float beta, float* y, int64_t count);
void convert_f32_to_bf16_reference(const float* in, uint16_t* out, int64_t count);
void convert_bf16_to_f32_reference(const uint16_t* in, float* out, int64_t count);

}  // namespace patchbay::kernels::cuda
