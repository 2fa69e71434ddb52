// The CUDA dispatch entries of cross_entropy and its backward (engine/kernel_signatures.hpp)
// through kernels/cuda/softmax_cross_entropy.hpp's cross_entropy_rows_*: ignore_index, label
// smoothing and per-row upstream gradients as on the CPU.
// One host read per forward, where the signature puts a host value: the targets are copied to
// the host to be checked (the CPU's message for a bad target) and counted (the number of rows
// not ignored, which the op divides the mean by). Targets are B*T integers; the logits stay on
// the device.
#include "cuda/cuda_kernel_support.hpp"
#include "engine/dispatch.hpp"
#include "engine/kernel_signatures.hpp"
#include "engine/ops/index_tensor.hpp"
#include "patchbay/kernels/cuda/softmax_cross_entropy.hpp"

namespace patchbay::cuda {
namespace {

using engine::CrossEntropyOptions;
using engine::DType;
using engine::Tensor;
namespace kc = kernels::cuda;

template <class Index>
int64_t counted_rows_checked_on_host(const Tensor& targets, int64_t classes, int64_t ignore_index) {
  const Tensor host = targets.to(engine::cpu());
  const Index* values = host.data<Index>();
  engine::detail::check_cross_entropy_targets(values, targets, classes, ignore_index);
  int64_t counted = 0;
  for (int64_t i = 0; i < host.numel(); ++i)
    counted += static_cast<int64_t>(values[i]) != ignore_index ? 1 : 0;
  return counted;
}

int64_t cross_entropy_cuda(const Tensor& logits, const Tensor& targets,
                           const CrossEntropyOptions& options, Tensor& row_loss,
                           Tensor& row_logsumexp) {
  const int64_t rows = logits.size(0), classes = logits.size(1);
  const auto smoothing = static_cast<float>(options.label_smoothing);
  const OnDeviceOf on(row_loss);
  if (targets.dtype() == DType::kI32) {
    const int64_t counted =
        counted_rows_checked_on_host<int32_t>(targets, classes, options.ignore_index);
    check_launch(
        kc::cross_entropy_rows_forward(logits.data<float>(), targets.data<int32_t>(),
                                       row_loss.data<float>(), row_logsumexp.data<float>(), rows,
                                       classes, options.ignore_index, smoothing, on.stream),
        "cross_entropy");
    return counted;
  }
  const int64_t counted =
      counted_rows_checked_on_host<int64_t>(targets, classes, options.ignore_index);
  check_launch(
      kc::cross_entropy_rows_forward(logits.data<float>(), targets.data<int64_t>(),
                                     row_loss.data<float>(), row_logsumexp.data<float>(), rows,
                                     classes, options.ignore_index, smoothing, on.stream),
      "cross_entropy");
  return counted;
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
