// CPU twins of the strided element-wise kernels (strided_reference.hpp).
#include "patchbay/kernels/cuda/strided_reference.hpp"

#include <cmath>
#include <cstring>

#include "patchbay/kernels/cuda/math/bf16.hpp"

namespace patchbay::kernels::cuda {

Strides contiguous_strides(const StridedShape& shape) {
  Strides strides;
  int64_t step = 1;
  for (int d = shape.rank - 1; d >= 0; --d) {
    strides.values[d] = step;
    step *= shape.sizes[d];
  }
  return strides;
}

void strided_copy_reference(const void* src, const Strides& src_strides, void* dst,
                            const Strides& dst_strides, const StridedShape& shape,
                            int element_bytes) {
  const auto* from = static_cast<const unsigned char*>(src);
  auto* to = static_cast<unsigned char*>(dst);
  for (int64_t i = 0; i < element_count(shape); ++i)
    std::memcpy(to + strided_offset(shape, dst_strides, i) * element_bytes,
                from + strided_offset(shape, src_strides, i) * element_bytes,
                static_cast<size_t>(element_bytes));
}

void strided_f32_to_bf16_reference(const float* src, const Strides& src_strides, uint16_t* dst,
                                   const Strides& dst_strides, const StridedShape& shape) {
  for (int64_t i = 0; i < element_count(shape); ++i)
    dst[strided_offset(shape, dst_strides, i)] =
        math::bf16_from_float(src[strided_offset(shape, src_strides, i)]);
}

void binary_strided_f32_reference(BinaryOp op, const float* a, const Strides& a_strides,
                                  const float* b, const Strides& b_strides, float* out,
                                  const Strides& out_strides, const StridedShape& shape) {
  for (int64_t i = 0; i < element_count(shape); ++i) {
    const float x = a[strided_offset(shape, a_strides, i)];
    const float y = b[strided_offset(shape, b_strides, i)];
    float z = 0.0f;
    switch (op) {
      case BinaryOp::kAdd:
        z = x + y;
        break;
      case BinaryOp::kSub:
        z = x - y;
        break;
      case BinaryOp::kMul:
        z = x * y;
        break;
      case BinaryOp::kDiv:
        z = x / y;
        break;
      case BinaryOp::kMaximum:
        z = std::isnan(x) || std::isnan(y) ? x + y : std::fmax(x, y);
        break;
      case BinaryOp::kMinimum:
        z = std::isnan(x) || std::isnan(y) ? x + y : std::fmin(x, y);
        break;
    }
    out[strided_offset(shape, out_strides, i)] = z;
  }
}

void unary_strided_f32_reference(math::UnaryOp op, float scalar, const float* x,
                                 const Strides& x_strides, float* out, const Strides& out_strides,
                                 const StridedShape& shape) {
  for (int64_t i = 0; i < element_count(shape); ++i)
    out[strided_offset(shape, out_strides, i)] =
        math::unary_value(op, scalar, x[strided_offset(shape, x_strides, i)]);
}

namespace {
bool is_masked(const void* mask, MaskType type, int64_t offset) {
  switch (type) {
    case MaskType::kU8:
      return static_cast<const uint8_t*>(mask)[offset] != 0;
    case MaskType::kI32:
      return static_cast<const int32_t*>(mask)[offset] != 0;
    case MaskType::kI64:
      return static_cast<const int64_t*>(mask)[offset] != 0;
    case MaskType::kF32:
      return static_cast<const float*>(mask)[offset] != 0.0f;
    case MaskType::kBF16:
      return math::float_from_bf16(static_cast<const uint16_t*>(mask)[offset]) != 0.0f;
  }
  return false;
}
}  // namespace

void masked_fill_strided_f32_reference(const float* x, const Strides& x_strides, const void* mask,
                                       MaskType mask_type, const Strides& mask_strides, float value,
                                       float* out, const Strides& out_strides,
                                       const StridedShape& shape) {
  for (int64_t i = 0; i < element_count(shape); ++i)
    out[strided_offset(shape, out_strides, i)] =
        is_masked(mask, mask_type, strided_offset(shape, mask_strides, i))
            ? value
            : x[strided_offset(shape, x_strides, i)];
}

void unary_backward_f32_reference(math::UnaryOp op, float scalar, const float* x, const float* dy,
                                  float* dx, int64_t count) {
  for (int64_t i = 0; i < count; ++i) dx[i] = dy[i] * math::unary_derivative(op, scalar, x[i]);
}

}  // namespace patchbay::kernels::cuda
