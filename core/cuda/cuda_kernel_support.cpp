// Helpers shared by the CUDA dispatch entries (cuda_kernel_support.hpp).
#include "cuda/cuda_kernel_support.hpp"

#include "common/error.hpp"
#include "engine/ops.hpp"

namespace patchbay::cuda {

void refuse_op(const char* op, const std::string& why, const engine::Tensor& operand) {
  throw Error(ErrorKind::kInvalidArgument, std::string("op '") + op + "' on cuda: " + why + " (" +
                                               operand.str() + "); run on the cpu (--device cpu)");
}

void check_launch(cudaError_t status, const char* op) {
  if (status != cudaSuccess) check(status, op);
}

void require_f32_contiguous(const char* op, const engine::Tensor& t) {
  if (t.dtype() != engine::DType::kF32 || !t.is_contiguous())
    refuse_op(op, "expected a contiguous f32 operand, as the engine passes its kernels", t);
}

kernels::cuda::StridedShape strided_shape_of(const char* op, const engine::Tensor& t) {
  kernels::cuda::StridedShape shape;
  if (t.dim() > kernels::cuda::kMaxStridedRank)
    refuse_op(op,
              "the strided kernels take at most " + std::to_string(kernels::cuda::kMaxStridedRank) +
                  " dimensions, found " + std::to_string(t.dim()),
              t);
  shape.rank = static_cast<int>(t.dim());
  for (int d = 0; d < shape.rank; ++d) shape.sizes[d] = t.shape()[static_cast<size_t>(d)];
  return shape;
}

kernels::cuda::Strides strides_of(const engine::Tensor& t) {
  kernels::cuda::Strides strides;
  for (size_t d = 0; d < t.strides().size() && d < kernels::cuda::kMaxStridedRank; ++d)
    strides.values[d] = t.strides()[d];
  return strides;
}

engine::Tensor ones_like_row(const engine::Tensor& like, int64_t n) {
  engine::Tensor ones = engine::Tensor::empty({n}, engine::DType::kF32, like.device());
  engine::fill_(ones, 1.0);
  return ones;
}

}  // namespace patchbay::cuda
