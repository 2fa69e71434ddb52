// Strided element-wise kernels (strided.hpp): grid-stride over the output's elements; each
// thread turns its linear index into every operand's offset (strided_offset: div/mod per
// dimension, so these suit permutes and broadcasts, not contiguous hot loops).
#include "launch.cuh"
#include "patchbay/kernels/cuda/math/bf16.hpp"
#include "patchbay/kernels/cuda/strided.hpp"

namespace patchbay::kernels::cuda {
namespace {

constexpr int kThreads = 256;

template <class T>
__global__ void strided_copy_kernel(const T* src, Strides src_strides, T* dst, Strides dst_strides,
                                    StridedShape shape, int64_t count) {
  const int64_t stride = int64_t(gridDim.x) * blockDim.x;
  for (int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; i < count; i += stride)
    dst[strided_offset(shape, dst_strides, i)] = src[strided_offset(shape, src_strides, i)];
}

__global__ void to_bf16_kernel(const float* src, Strides src_strides, uint16_t* dst,
                               Strides dst_strides, StridedShape shape, int64_t count) {
  const int64_t stride = int64_t(gridDim.x) * blockDim.x;
  for (int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; i < count; i += stride)
    dst[strided_offset(shape, dst_strides, i)] =
        math::bf16_from_float(src[strided_offset(shape, src_strides, i)]);
}

__global__ void from_bf16_kernel(const uint16_t* src, Strides src_strides, float* dst,
                                 Strides dst_strides, StridedShape shape, int64_t count) {
  const int64_t stride = int64_t(gridDim.x) * blockDim.x;
  for (int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; i < count; i += stride)
    dst[strided_offset(shape, dst_strides, i)] =
        math::float_from_bf16(src[strided_offset(shape, src_strides, i)]);
}

__device__ __forceinline__ float apply(BinaryOp op, float a, float b) {
  switch (op) {
    case BinaryOp::kAdd:
      return a + b;
    case BinaryOp::kSub:
      return a - b;
    case BinaryOp::kMul:
      return a * b;
    case BinaryOp::kDiv:
      return a / b;
    case BinaryOp::kMaximum:
      return a != a || b != b ? a + b : fmaxf(a, b);  // NaN propagates
    case BinaryOp::kMinimum:
      return a != a || b != b ? a + b : fminf(a, b);
  }
  return 0.0f;
}

__global__ void binary_kernel(BinaryOp op, const float* a, Strides a_strides, const float* b,
                              Strides b_strides, float* out, Strides out_strides,
                              StridedShape shape, int64_t count) {
  const int64_t stride = int64_t(gridDim.x) * blockDim.x;
  for (int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; i < count; i += stride)
    out[strided_offset(shape, out_strides, i)] =
        apply(op, a[strided_offset(shape, a_strides, i)], b[strided_offset(shape, b_strides, i)]);
}

__global__ void unary_kernel(math::UnaryOp op, float scalar, const float* x, Strides x_strides,
                             float* out, Strides out_strides, StridedShape shape, int64_t count) {
  const int64_t stride = int64_t(gridDim.x) * blockDim.x;
  for (int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; i < count; i += stride)
    out[strided_offset(shape, out_strides, i)] =
        math::unary_value(op, scalar, x[strided_offset(shape, x_strides, i)]);
}

template <class M>
__global__ void masked_fill_kernel(const float* x, Strides x_strides, const M* mask,
                                   Strides mask_strides, float value, float* out,
                                   Strides out_strides, StridedShape shape, int64_t count) {
  const int64_t stride = int64_t(gridDim.x) * blockDim.x;
  for (int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; i < count; i += stride) {
    const M m = mask[strided_offset(shape, mask_strides, i)];
    bool masked;
    if constexpr (sizeof(M) == 2)  // bf16 pattern: zero when all but the sign bit are zero
      masked = (m & 0x7FFFu) != 0;
    else
      masked = m != M(0);  // floats: -0.0 == 0 is not masked, NaN != 0 is
    out[strided_offset(shape, out_strides, i)] =
        masked ? value : x[strided_offset(shape, x_strides, i)];
  }
}

__global__ void unary_backward_kernel(math::UnaryOp op, float scalar, const float* x,
                                      const float* dy, float* dx, int64_t count) {
  const int64_t stride = int64_t(gridDim.x) * blockDim.x;
  for (int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; i < count; i += stride)
    dx[i] = dy[i] * math::unary_derivative(op, scalar, x[i]);
}

bool valid(const StridedShape& shape) { return shape.rank >= 0 && shape.rank <= kMaxStridedRank; }

unsigned blocks(int64_t count) { return detail::grid_stride_blocks(count, kThreads); }

template <class T>
cudaError_t launch_copy(const void* src, const Strides& ss, void* dst, const Strides& ds,
                        const StridedShape& shape, int64_t count, cudaStream_t stream) {
  strided_copy_kernel<T><<<blocks(count), kThreads, 0, stream>>>(
      static_cast<const T*>(src), ss, static_cast<T*>(dst), ds, shape, count);
  return cudaGetLastError();
}

template <class M>
cudaError_t launch_masked_fill(const float* x, const Strides& xs, const void* mask,
                               const Strides& ms, float value, float* out, const Strides& os,
                               const StridedShape& shape, int64_t count, cudaStream_t stream) {
  masked_fill_kernel<M><<<blocks(count), kThreads, 0, stream>>>(x, xs, static_cast<const M*>(mask),
                                                                ms, value, out, os, shape, count);
  return cudaGetLastError();
}

}  // namespace

cudaError_t masked_fill_strided_f32(const float* x, const Strides& x_strides, const void* mask,
                                    MaskType mask_type, const Strides& mask_strides, float value,
                                    float* out, const Strides& out_strides,
                                    const StridedShape& shape, cudaStream_t stream) {
  if (!valid(shape)) return cudaErrorInvalidValue;
  const int64_t count = element_count(shape);
  if (count <= 0) return cudaSuccess;
  switch (mask_type) {
    case MaskType::kU8:
      return launch_masked_fill<uint8_t>(x, x_strides, mask, mask_strides, value, out, out_strides,
                                         shape, count, stream);
    case MaskType::kI32:
      return launch_masked_fill<int32_t>(x, x_strides, mask, mask_strides, value, out, out_strides,
                                         shape, count, stream);
    case MaskType::kI64:
      return launch_masked_fill<int64_t>(x, x_strides, mask, mask_strides, value, out, out_strides,
                                         shape, count, stream);
    case MaskType::kF32:
      return launch_masked_fill<float>(x, x_strides, mask, mask_strides, value, out, out_strides,
                                       shape, count, stream);
    case MaskType::kBF16:
      return launch_masked_fill<uint16_t>(x, x_strides, mask, mask_strides, value, out, out_strides,
                                          shape, count, stream);
  }
  return cudaErrorInvalidValue;
}

cudaError_t strided_copy(const void* src, const Strides& src_strides, void* dst,
                         const Strides& dst_strides, const StridedShape& shape, int element_bytes,
                         cudaStream_t stream) {
  if (!valid(shape)) return cudaErrorInvalidValue;
  const int64_t count = element_count(shape);
  if (count <= 0) return cudaSuccess;
  switch (element_bytes) {
    case 1:
      return launch_copy<uint8_t>(src, src_strides, dst, dst_strides, shape, count, stream);
    case 2:
      return launch_copy<uint16_t>(src, src_strides, dst, dst_strides, shape, count, stream);
    case 4:
      return launch_copy<uint32_t>(src, src_strides, dst, dst_strides, shape, count, stream);
    case 8:
      return launch_copy<uint64_t>(src, src_strides, dst, dst_strides, shape, count, stream);
    default:
      return cudaErrorInvalidValue;
  }
}

cudaError_t strided_f32_to_bf16(const float* src, const Strides& src_strides, uint16_t* dst,
                                const Strides& dst_strides, const StridedShape& shape,
                                cudaStream_t stream) {
  if (!valid(shape)) return cudaErrorInvalidValue;
  const int64_t count = element_count(shape);
  if (count <= 0) return cudaSuccess;
  to_bf16_kernel<<<blocks(count), kThreads, 0, stream>>>(src, src_strides, dst, dst_strides, shape,
                                                         count);
  return cudaGetLastError();
}

cudaError_t strided_bf16_to_f32(const uint16_t* src, const Strides& src_strides, float* dst,
                                const Strides& dst_strides, const StridedShape& shape,
                                cudaStream_t stream) {
  if (!valid(shape)) return cudaErrorInvalidValue;
  const int64_t count = element_count(shape);
  if (count <= 0) return cudaSuccess;
  from_bf16_kernel<<<blocks(count), kThreads, 0, stream>>>(src, src_strides, dst, dst_strides,
                                                           shape, count);
  return cudaGetLastError();
}

cudaError_t binary_strided_f32(BinaryOp op, const float* a, const Strides& a_strides,
                               const float* b, const Strides& b_strides, float* out,
                               const Strides& out_strides, const StridedShape& shape,
                               cudaStream_t stream) {
  if (!valid(shape)) return cudaErrorInvalidValue;
  const int64_t count = element_count(shape);
  if (count <= 0) return cudaSuccess;
  binary_kernel<<<blocks(count), kThreads, 0, stream>>>(op, a, a_strides, b, b_strides, out,
                                                        out_strides, shape, count);
  return cudaGetLastError();
}

cudaError_t unary_strided_f32(math::UnaryOp op, float scalar, const float* x,
                              const Strides& x_strides, float* out, const Strides& out_strides,
                              const StridedShape& shape, cudaStream_t stream) {
  if (!valid(shape)) return cudaErrorInvalidValue;
  const int64_t count = element_count(shape);
  if (count <= 0) return cudaSuccess;
  unary_kernel<<<blocks(count), kThreads, 0, stream>>>(op, scalar, x, x_strides, out, out_strides,
                                                       shape, count);
  return cudaGetLastError();
}

cudaError_t unary_backward_f32(math::UnaryOp op, float scalar, const float* x, const float* dy,
                               float* dx, int64_t count, cudaStream_t stream) {
  if (count <= 0) return cudaSuccess;
  unary_backward_kernel<<<blocks(count), kThreads, 0, stream>>>(op, scalar, x, dy, dx, count);
  return cudaGetLastError();
}

}  // namespace patchbay::kernels::cuda
