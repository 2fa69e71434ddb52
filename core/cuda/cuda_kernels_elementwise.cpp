// The CUDA dispatch entries of the engine's element-wise ops, registered by initialise_cuda()
// when a GPU is usable (never by static initialisation: a build with CUDA on a machine without
// a GPU keeps the table's "no kernel for device type cuda" answers). Signatures and the layouts
// the ops guarantee: engine/kernel_signatures.hpp.
//   copy:  any layout, broadcast included (stride 0), same dtype or f32 <-> bf16 (round to
//          nearest even); contiguous pairs take cudaMemcpyAsync or the contiguous converters.
//   fill:  contiguous through Backend::fill (cudaMemsetAsync or a doubled pattern); strided as
//          a copy from one element with zero strides.
//   add, binary, unary, masked_fill: the strided kernels (kernels/cuda/strided.hpp), f32;
//          add of contiguous same-layout operands takes the contiguous kernel.
//   unary_backward, dropout_mask, random: contiguous f32 (the engine's layout for them).
// The unary kinds are kernels/cuda/math/unary.hpp's UnaryOp (engine::kernel::UnaryKind is that
// enum), whose formulas the CUDA kernels share with their CPU twins.
#include <cuda_runtime_api.h>

#include <cstdint>
#include <initializer_list>

#include "cuda/cuda_kernel_support.hpp"
#include "engine/dispatch.hpp"
#include "engine/kernel_signatures.hpp"
#include "engine/ops.hpp"
#include "patchbay/kernels/cuda/elementwise.hpp"
#include "patchbay/kernels/cuda/random_reduce_rows.hpp"
#include "patchbay/kernels/cuda/strided.hpp"

namespace patchbay::cuda {
namespace {

using engine::DType;
using engine::Tensor;
namespace kc = kernels::cuda;
namespace sig = engine::kernel;

void copy_cuda(const Tensor& src, Tensor& dst) {
  const int64_t n = dst.numel();
  if (n == 0) return;
  const OnDeviceOf on(dst);
  const bool dense = src.is_contiguous() && dst.is_contiguous();
  if (src.dtype() == dst.dtype()) {
    if (dense) {
      check(cudaMemcpyAsync(dst.data_ptr(), src.data_ptr(), dst.nbytes(), cudaMemcpyDeviceToDevice,
                            on.stream),
            "cudaMemcpyAsync (copy)");
      return;
    }
    check_launch(kc::strided_copy(src.data_ptr(), strides_of(src), dst.data_ptr(), strides_of(dst),
                                  strided_shape_of("copy", dst),
                                  static_cast<int>(engine::dtype_size(dst.dtype())), on.stream),
                 "copy (strided_copy)");
  } else if (src.dtype() == DType::kF32 && dst.dtype() == DType::kBF16) {
    check_launch(
        dense ? kc::convert_f32_to_bf16(src.data<float>(), dst.data<uint16_t>(), n, on.stream)
              : kc::strided_f32_to_bf16(src.data<float>(), strides_of(src), dst.data<uint16_t>(),
                                        strides_of(dst), strided_shape_of("copy", dst), on.stream),
        "copy (f32 -> bf16)");
  } else if (src.dtype() == DType::kBF16 && dst.dtype() == DType::kF32) {
    check_launch(
        dense ? kc::convert_bf16_to_f32(src.data<uint16_t>(), dst.data<float>(), n, on.stream)
              : kc::strided_bf16_to_f32(src.data<uint16_t>(), strides_of(src), dst.data<float>(),
                                        strides_of(dst), strided_shape_of("copy", dst), on.stream),
        "copy (bf16 -> f32)");
  } else {
    refuse_op("copy",
              std::string("converting ") + engine::dtype_name(src.dtype()) + " to " +
                  engine::dtype_name(dst.dtype()) +
                  " needs a kernel not written yet (f32 <-> bf16 and same-dtype copies run)",
              src);
  }
}

void fill_cuda(Tensor& dst, double value) {
  if (dst.numel() == 0) return;
  if (!dst.is_contiguous()) {  // one element, broadcast over dst's layout by zero strides
    Tensor one = Tensor::empty({1}, dst.dtype(), dst.device());
    fill_cuda(one, value);
    const OnDeviceOf on(dst);
    check_launch(kc::strided_copy(one.data_ptr(), kc::Strides{}, dst.data_ptr(), strides_of(dst),
                                  strided_shape_of("fill", dst),
                                  static_cast<int>(engine::dtype_size(dst.dtype())), on.stream),
                 "fill (strided)");
    return;
  }
  unsigned char pattern[8];
  engine::store_from_f64(pattern, 0, dst.dtype(), value);
  engine::Backend& backend = engine::backend_for(dst.device());
  backend.fill(dst.data_ptr(), pattern, engine::dtype_size(dst.dtype()),
               static_cast<size_t>(dst.numel()), backend.default_stream());
}

void binary_strided(const char* op, kc::BinaryOp kind, const Tensor& a, const Tensor& b,
                    Tensor& out) {
  if (out.numel() == 0) return;
  const OnDeviceOf on(out);
  check_launch(kc::binary_strided_f32(kind, a.data<float>(), strides_of(a), b.data<float>(),
                                      strides_of(b), out.data<float>(), strides_of(out),
                                      strided_shape_of(op, out), on.stream),
               op);
}

void add_cuda(const Tensor& a, const Tensor& b, Tensor& out) {
  if (a.is_contiguous() && b.is_contiguous() && out.is_contiguous()) {
    const OnDeviceOf on(out);
    check_launch(
        kc::add_f32(a.data<float>(), b.data<float>(), out.data<float>(), out.numel(), on.stream),
        "add");
    return;
  }
  binary_strided("add", kc::BinaryOp::kAdd, a, b, out);
}

void binary_cuda(sig::BinaryKind kind, const Tensor& a, const Tensor& b, Tensor& out) {
  switch (kind) {
    case sig::BinaryKind::kSub:
      return binary_strided("sub", kc::BinaryOp::kSub, a, b, out);
    case sig::BinaryKind::kMul:
      return binary_strided("mul", kc::BinaryOp::kMul, a, b, out);
    case sig::BinaryKind::kDiv:
      return binary_strided("div", kc::BinaryOp::kDiv, a, b, out);
  }
}

void unary_cuda(sig::UnaryKind kind, double s, const Tensor& x, Tensor& out) {
  if (x.numel() == 0) return;
  const OnDeviceOf on(out);
  check_launch(kc::unary_strided_f32(kind, static_cast<float>(s), x.data<float>(), strides_of(x),
                                     out.data<float>(), strides_of(out),
                                     strided_shape_of("unary", x), on.stream),
               "unary");
}

void unary_backward_cuda(sig::UnaryKind kind, double s, const Tensor& x, const Tensor& grad,
                         Tensor& dx) {
  if (x.numel() == 0) return;
  for (const Tensor* t : std::initializer_list<const Tensor*>{&x, &grad, &dx})
    require_f32_contiguous("unary_backward", *t);
  const OnDeviceOf on(dx);
  check_launch(kc::unary_backward_f32(kind, static_cast<float>(s), x.data<float>(),
                                      grad.data<float>(), dx.data<float>(), x.numel(), on.stream),
               "unary_backward");
}

kc::MaskType mask_type_of(const Tensor& mask) {
  switch (mask.dtype()) {
    case DType::kF32:
      return kc::MaskType::kF32;
    case DType::kBF16:
      return kc::MaskType::kBF16;
    case DType::kI32:
      return kc::MaskType::kI32;
    case DType::kI64:
      return kc::MaskType::kI64;
    case DType::kF16:
      break;
  }
  refuse_op("masked_fill", "an f16 mask needs a kernel not written yet (use f32, bf16 or ints)",
            mask);
}

void masked_fill_cuda(const Tensor& x, const Tensor& mask, double value, Tensor& out) {
  if (out.numel() == 0) return;
  const OnDeviceOf on(out);
  check_launch(kc::masked_fill_strided_f32(
                   x.data<float>(), strides_of(x), mask.data_ptr(), mask_type_of(mask),
                   strides_of(mask), static_cast<float>(value), out.data<float>(), strides_of(out),
                   strided_shape_of("masked_fill", out), on.stream),
               "masked_fill");
}

void dropout_mask_cuda(const Tensor& u, double p, Tensor& keep) {
  if (u.numel() == 0) return;
  require_f32_contiguous("dropout_mask", u);
  require_f32_contiguous("dropout_mask", keep);
  const OnDeviceOf on(keep);
  check_launch(kc::dropout_mask_f32(u.data<float>(), p, keep.data<float>(), u.numel(), on.stream),
               "dropout_mask");
}

// The random kernel gets only the output pointer: its device comes from the pointer itself.
void random_cuda(float* out, int64_t count, uint64_t first_block, uint64_t seed, bool normal,
                 double low, double high) {
  if (count == 0) return;
  cudaPointerAttributes attributes{};
  check(cudaPointerGetAttributes(&attributes, out), "cudaPointerGetAttributes (random)");
  const engine::Device device{engine::DeviceType::kCuda, attributes.device};
  const DeviceGuard guard(device.index);
  check_launch(kc::random_fill_f32(out, count, first_block, seed, normal, low, high,
                                   compute_stream_of(device)),
               "random");
}

}  // namespace

void register_elementwise_kernels() {
  using engine::DeviceType;
  using engine::register_kernel;
  register_kernel<sig::CopyKernel>("copy", DeviceType::kCuda, copy_cuda);
  register_kernel<sig::FillKernel>("fill", DeviceType::kCuda, fill_cuda);
  register_kernel<sig::AddKernel>("add", DeviceType::kCuda, add_cuda);
  register_kernel<sig::BinaryKernel>("binary", DeviceType::kCuda, binary_cuda);
  register_kernel<sig::UnaryKernel>("unary", DeviceType::kCuda, unary_cuda);
  register_kernel<sig::UnaryBackwardKernel>("unary_backward", DeviceType::kCuda,
                                            unary_backward_cuda);
  register_kernel<sig::MaskedFillKernel>("masked_fill", DeviceType::kCuda, masked_fill_cuda);
  register_kernel<sig::DropoutMaskKernel>("dropout_mask", DeviceType::kCuda, dropout_mask_cuda);
  register_kernel<sig::RandomKernel>("random", DeviceType::kCuda, random_cuda);
}

}  // namespace patchbay::cuda
