// The CUDA dispatch entries of the engine's data-movement ops, registered by
// initialise_cuda() when a GPU is usable (never by static initialisation: a build with CUDA
// on a machine without a GPU keeps the table's "no kernel for device type cuda" answers).
//   fill: every element of a contiguous destination, through Backend::fill (cudaMemsetAsync,
//         or one staged pattern doubled by device-to-device copies).
//   copy: contiguous to contiguous, same dtype (cudaMemcpyAsync) or f32 <-> bf16 (the
//         conversion kernels of kernels/cuda/elementwise.hpp, round to nearest even).
// Anything else (strided or broadcast operands, other dtype pairs) is refused naming the op,
// the device and both tensors: the strided copy kernel is not written yet.
// The signatures are those of core/engine/ops/copy_fill.cpp's CopyKernel and FillKernel.
#include <cuda_runtime_api.h>

#include <cstdint>
#include <string>

#include "common/error.hpp"
#include "cuda/cuda_runtime_helpers.hpp"
#include "engine/dispatch.hpp"
#include "engine/tensor.hpp"
#include "patchbay/kernels/cuda/elementwise.hpp"

namespace patchbay::cuda {
namespace {

using engine::DType;
using engine::Tensor;

using CopyKernel = void(const Tensor& src, Tensor& dst);
using FillKernel = void(Tensor& dst, double value);

[[noreturn]] void refuse(const char* op, const Tensor& a, const Tensor& b, const char* why) {
  throw Error(ErrorKind::kInvalidArgument, std::string("op '") + op + "' on cuda: " + why + " (" +
                                               a.str() + " -> " + b.str() +
                                               "); run on the cpu (--device cpu)");
}

void fill_cuda(Tensor& dst, double value) {
  if (dst.numel() == 0) return;
  if (!dst.is_contiguous())
    refuse("fill", dst, dst, "a strided destination needs a kernel not written yet");
  unsigned char pattern[8];
  engine::store_from_f64(pattern, 0, dst.dtype(), value);
  engine::Backend& backend = engine::backend_for(dst.device());
  backend.fill(dst.data_ptr(), pattern, engine::dtype_size(dst.dtype()),
               static_cast<size_t>(dst.numel()), backend.default_stream());
}

void copy_cuda(const Tensor& src, Tensor& dst) {
  const int64_t n = dst.numel();
  if (n == 0) return;
  if (!src.is_contiguous() || !dst.is_contiguous())
    refuse("copy", src, dst, "strided or broadcast operands need a kernel not written yet");
  DeviceGuard guard(dst.device().index);
  const cudaStream_t stream = compute_stream_of(dst.device());
  if (src.dtype() == dst.dtype()) {
    check(cudaMemcpyAsync(dst.data_ptr(), src.data_ptr(), dst.nbytes(), cudaMemcpyDeviceToDevice,
                          stream),
          "cudaMemcpyAsync (copy)");
  } else if (src.dtype() == DType::kF32 && dst.dtype() == DType::kBF16) {
    check(kernels::cuda::convert_f32_to_bf16(src.data<float>(), dst.data<uint16_t>(), n, stream),
          "convert_f32_to_bf16");
  } else if (src.dtype() == DType::kBF16 && dst.dtype() == DType::kF32) {
    check(kernels::cuda::convert_bf16_to_f32(src.data<uint16_t>(), dst.data<float>(), n, stream),
          "convert_bf16_to_f32");
  } else {
    refuse("copy", src, dst, "this dtype pair needs a conversion kernel not written yet");
  }
}

}  // namespace

void register_copy_fill_kernels() {
  engine::register_kernel<CopyKernel>("copy", engine::DeviceType::kCuda, copy_cuda);
  engine::register_kernel<FillKernel>("fill", engine::DeviceType::kCuda, fill_cuda);
}

}  // namespace patchbay::cuda
