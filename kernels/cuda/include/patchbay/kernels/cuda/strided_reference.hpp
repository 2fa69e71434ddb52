// CPU twins of strided.hpp (same math, one thread).
#pragma once

#include <cstdint>

#include "patchbay/kernels/cuda/math/unary.hpp"
#include "patchbay/kernels/cuda/strided_types.hpp"

namespace patchbay::kernels::cuda {

void strided_copy_reference(const void* src, const Strides& src_strides, void* dst,
                            const Strides& dst_strides, const StridedShape& shape,
                            int element_bytes);
void strided_f32_to_bf16_reference(const float* src, const Strides& src_strides, uint16_t* dst,
                                   const Strides& dst_strides, const StridedShape& shape);
void binary_strided_f32_reference(BinaryOp op, const float* a, const Strides& a_strides,
                                  const float* b, const Strides& b_strides, float* out,
                                  const Strides& out_strides, const StridedShape& shape);
void unary_strided_f32_reference(math::UnaryOp op, float scalar, const float* x,
                                 const Strides& x_strides, float* out, const Strides& out_strides,
                                 const StridedShape& shape);
void masked_fill_strided_f32_reference(const float* x, const Strides& x_strides, const void* mask,
                                       MaskType mask_type, const Strides& mask_strides, float value,
                                       float* out, const Strides& out_strides,
                                       const StridedShape& shape);
void unary_backward_f32_reference(math::UnaryOp op, float scalar, const float* x, const float* dy,
                                  float* dx, int64_t count);

// Row-major (contiguous) strides of a shape.
Strides contiguous_strides(const StridedShape& shape);

}  // namespace patchbay::kernels::cuda
