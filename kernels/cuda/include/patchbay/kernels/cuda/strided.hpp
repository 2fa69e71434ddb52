// Strided element-wise kernels: the device half of the engine's copy (contiguous(), permute,
// broadcast, f32 <-> bf16 conversion), binary and unary ops, masked_fill, on tensors of any layout
// up to rank 8. Every operand is (pointer, strides) over one iteration shape (the output's); an
// input stride of 0 broadcasts. Outputs must not overlap inputs unless identical in layout.
// One thread per output element (grid-stride), offsets from the linear index by div/mod: for
// contiguous operands prefer the kernels of elementwise.hpp. CPU twins: strided_reference.hpp.
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>

#include "patchbay/kernels/cuda/math/unary.hpp"
#include "patchbay/kernels/cuda/strided_types.hpp"

namespace patchbay::kernels::cuda {

// dst = src element by element, same dtype of element_bytes (1, 2, 4 or 8); returns
// cudaErrorInvalidValue for another size or a rank above kMaxStridedRank.
cudaError_t strided_copy(const void* src, const Strides& src_strides, void* dst,
                         const Strides& dst_strides, const StridedShape& shape, int element_bytes,
                         cudaStream_t stream);

// dst (bf16 patterns) = round_to_bf16(src), and the widening back.
cudaError_t strided_f32_to_bf16(const float* src, const Strides& src_strides, uint16_t* dst,
                                const Strides& dst_strides, const StridedShape& shape,
                                cudaStream_t stream);
cudaError_t strided_bf16_to_f32(const uint16_t* src, const Strides& src_strides, float* dst,
                                const Strides& dst_strides, const StridedShape& shape,
                                cudaStream_t stream);

// out = a (op) b, f32.
cudaError_t binary_strided_f32(BinaryOp op, const float* a, const Strides& a_strides,
                               const float* b, const Strides& b_strides, float* out,
                               const Strides& out_strides, const StridedShape& shape,
                               cudaStream_t stream);

// out = op(x) (scalar: the *Scalar ops' operand), f32.
cudaError_t unary_strided_f32(math::UnaryOp op, float scalar, const float* x,
                              const Strides& x_strides, float* out, const Strides& out_strides,
                              const StridedShape& shape, cudaStream_t stream);

// out = mask != 0 ? value : x (f32 x and out; mask of mask_type, broadcast by its strides).
cudaError_t masked_fill_strided_f32(const float* x, const Strides& x_strides, const void* mask,
                                    MaskType mask_type, const Strides& mask_strides, float value,
                                    float* out, const Strides& out_strides,
                                    const StridedShape& shape, cudaStream_t stream);

// dx = dy * op'(x), contiguous f32 of count elements.
cudaError_t unary_backward_f32(math::UnaryOp op, float scalar, const float* x, const float* dy,
                               float* dx, int64_t count, cudaStream_t stream);

}  // namespace patchbay::kernels::cuda
