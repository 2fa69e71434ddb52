// Internal to core/cuda: what every CUDA dispatch entry (cuda_kernels_*.cpp) needs to adapt an
// engine kernel signature (engine/kernel_signatures.hpp) to the raw-pointer kernels of
// kernels/cuda: the operand's device made current with its compute stream, the engine tensor's
// shape and element strides as the strided kernels take them, launch checks, and refusals that
// name the op, the operands and what to do instead.
#pragma once

#include <cuda_runtime_api.h>

#include <string>

#include "cuda/cuda_runtime_helpers.hpp"
#include "engine/tensor.hpp"
#include "patchbay/kernels/cuda/strided_types.hpp"

namespace patchbay::cuda {

// For the scope of a dispatch entry: `tensor`'s device is current and `stream` is its compute
// stream (every kernel of the entry is queued there, in order).
class OnDeviceOf {
 public:
  explicit OnDeviceOf(const engine::Tensor& tensor)
      : guard_(tensor.device().index), stream(compute_stream_of(tensor.device())) {}

 private:
  DeviceGuard guard_;

 public:
  const cudaStream_t stream;
};

// Throws kInvalidArgument: "op 'X' on cuda: WHY (OPERAND); run on the cpu (--device cpu)".
[[noreturn]] void refuse_op(const char* op, const std::string& why, const engine::Tensor& operand);
// Throws kInternal naming the op and the kernel's error when status is not cudaSuccess.
void check_launch(cudaError_t status, const char* op);
// Refuses (refuse_op) unless `t` is a contiguous f32 tensor.
void require_f32_contiguous(const char* op, const engine::Tensor& t);

// t's shape and element strides for the strided kernels (refused above kMaxStridedRank dims).
kernels::cuda::StridedShape strided_shape_of(const char* op, const engine::Tensor& t);
kernels::cuda::Strides strides_of(const engine::Tensor& t);

// A contiguous f32 [n] tensor of ones on `like`'s device (a missing layer-norm gain).
engine::Tensor ones_like_row(const engine::Tensor& like, int64_t n);

// Registration of each family's entries (called by initialise_cuda() once a GPU is usable).
void register_elementwise_kernels();
void register_matmul_kernels();
void register_norm_softmax_kernels();
void register_row_kernels();
void register_attention_kernels();
void register_cross_entropy_kernels();
void register_optimizer_kernels();
void register_indexing_kernels();
void register_linear_attention_kernels();

}  // namespace patchbay::cuda
