// The CUDA dispatch entries of cross_entropy and its backward (engine/kernel_signatures.hpp)
// through kernels/cuda/softmax_cross_entropy.hpp's cross_entropy_rows_*: ignore_index, label
// smoothing and per-row upstream gradients as on the CPU.
// Nothing is read back: the targets are checked on the device by kernels/cuda/index_checks.hpp
// (a bad target goes into the device's error record, raised at the host's next read:
// engine/device_index_errors.hpp; the rows kernel gives that row a NaN loss and reads nothing
// for it), which also counts the rows not ignored and writes the mean factors the op needs.
#include "cuda/cuda_kernel_support.hpp"
#include "engine/device_index_errors.hpp"
#include "engine/dispatch.hpp"
#include "engine/kernel_signatures.hpp"
#include "engine/ops/index_tensor.hpp"
#include "patchbay/kernels/cuda/index_checks.hpp"
#include "patchbay/kernels/cuda/softmax_cross_entropy.hpp"

namespace patchbay::cuda {
namespace {

using engine::CrossEntropyOptions;
using engine::DType;
using engine::Tensor;
namespace kc = kernels::cuda;

void cross_entropy_cuda(const Tensor& logits, const Tensor& targets,
                        const CrossEntropyOptions& options, Tensor& row_loss, Tensor& row_logsumexp,
                        Tensor& mean_factors) {
  const int64_t rows = logits.size(0), classes = logits.size(1);
  const auto smoothing = static_cast<float>(options.label_smoothing);
  const kc::math::IndexCheck check{.op = kc::math::IndexErrorOp::kCrossEntropyTarget,
                                   .bound = classes,
                                   .allow_extra = true,
                                   .extra = options.ignore_index,
                                   .detail = options.ignore_index};
  kc::math::IndexErrorRecord* record = engine::index_error_record_for(logits.device());
  const OnDeviceOf on(row_loss);
  engine::detail::visit_index_type(targets, [&](auto index_type) {
    using Index = decltype(index_type);
    check_launch(kc::check_indices(targets.data<Index>(), targets.numel(), check, record,
                                   mean_factors.data<float>(), on.stream),
                 "cross_entropy (target check)");
    check_launch(
        kc::cross_entropy_rows_forward(logits.data<float>(), targets.data<Index>(),
                                       row_loss.data<float>(), row_logsumexp.data<float>(), rows,
                                       classes, options.ignore_index, smoothing, on.stream),
        "cross_entropy");
  });
}

void cross_entropy_backward_cuda(const Tensor& logits, const Tensor& targets,
                                 const Tensor& row_logsumexp, const Tensor& row_grad,
                                 const CrossEntropyOptions& options, Tensor& grad_logits) {
  const int64_t rows = logits.size(0), classes = logits.size(1);
  const auto smoothing = static_cast<float>(options.label_smoothing);
  const OnDeviceOf on(grad_logits);
  const cudaError_t status =
      targets.dtype() == DType::kI32
          ? kc::cross_entropy_rows_backward(logits.data<float>(), targets.data<int32_t>(),
                                            row_logsumexp.data<float>(), row_grad.data<float>(),
                                            grad_logits.data<float>(), rows, classes,
                                            options.ignore_index, smoothing, on.stream)
          : kc::cross_entropy_rows_backward(logits.data<float>(), targets.data<int64_t>(),
                                            row_logsumexp.data<float>(), row_grad.data<float>(),
                                            grad_logits.data<float>(), rows, classes,
                                            options.ignore_index, smoothing, on.stream);
  check_launch(status, "cross_entropy_backward");
}

}  // namespace

void register_cross_entropy_kernels() {
  namespace sig = engine::kernel;
  engine::register_kernel<sig::CrossEntropyForwardKernel>(
      "cross_entropy", engine::DeviceType::kCuda, cross_entropy_cuda);
  engine::register_kernel<sig::CrossEntropyBackwardKernel>(
      "cross_entropy_backward", engine::DeviceType::kCuda, cross_entropy_backward_cuda);
}

}  // namespace patchbay::cuda
