// cross_entropy(logits, targets, options): the engine op around the raw-pointer kernels in
// kernels/indexing (patchbay/kernels/cross_entropy.hpp). The forward kernel returns per-row
// losses and log-sum-exps plus the mean factors (1/count of the counted rows, on the logits'
// device, so a device reads nothing back); the op reduces them (mean, sum or none) and records
// a backward that feeds the kernel one gradient per row: upstream/count for the mean, upstream
// for the sum, upstream[row] for none.
// Logits of any float dtype are computed in f32 and the loss is returned in f32.
#include "patchbay/kernels/cross_entropy.hpp"

#include <cmath>

#include "engine/dispatch.hpp"
#include "engine/kernel_signatures.hpp"
#include "engine/ops.hpp"
#include "engine/ops/index_tensor.hpp"
#include "engine/ops/op_helpers.hpp"
#include "patchbay/kernels/cuda/math/index_error.hpp"

namespace patchbay::engine {
namespace {

using kernel::CrossEntropyBackwardKernel;
using kernel::CrossEntropyForwardKernel;

kernels::CrossEntropyOptions kernel_options(const CrossEntropyOptions& options) {
  return {.ignore_index = options.ignore_index,
          .label_smoothing = static_cast<float>(options.label_smoothing)};
}

void cross_entropy_forward_cpu(const Tensor& logits, const Tensor& targets,
                               const CrossEntropyOptions& options, Tensor& row_loss,
                               Tensor& row_logsumexp, Tensor& mean_factors) {
  const int64_t rows = logits.size(0), classes = logits.size(1);
  const int64_t counted = detail::visit_index_type(targets, [&](auto index_type) {
    using Index = decltype(index_type);
    const Index* target_data = targets.data<Index>();
    detail::check_cross_entropy_targets(target_data, targets, classes, options.ignore_index);
    return kernels::cross_entropy_forward(logits.data<float>(), target_data, rows, classes,
                                          kernel_options(options), row_loss.data<float>(),
                                          row_logsumexp.data<float>());
  });
  kernels::cuda::math::mean_factors_of_count(counted, mean_factors.data<float>());
}
PATCHBAY_REGISTER_KERNEL(CrossEntropyForwardKernel, "cross_entropy", DeviceType::kCpu,
                         cross_entropy_forward_cpu);

void cross_entropy_backward_cpu(const Tensor& logits, const Tensor& targets,
                                const Tensor& row_logsumexp, const Tensor& row_grad,
                                const CrossEntropyOptions& options, Tensor& grad_logits) {
  detail::visit_index_type(targets, [&](auto index_type) {
    using Index = decltype(index_type);
    kernels::cross_entropy_backward(logits.data<float>(), targets.data<Index>(),
                                    row_logsumexp.data<float>(), row_grad.data<float>(),
                                    logits.size(0), logits.size(1), kernel_options(options),
                                    grad_logits.data<float>());
  });
}
PATCHBAY_REGISTER_KERNEL(CrossEntropyBackwardKernel, "cross_entropy_backward", DeviceType::kCpu,
                         cross_entropy_backward_cpu);

void check_cross_entropy_arguments(const Tensor& logits, const Tensor& targets,
                                   const CrossEntropyOptions& options) {
  detail::check_float(logits, "cross_entropy");
  detail::check_index_tensor(targets, "cross_entropy", "targets");
  if (logits.dim() < 1 || logits.size(-1) < 1)
    throw Error(ErrorKind::kInvalidArgument,
                detail::shape_message("cross_entropy", "logits [..., V] with V >= 1", logits));
  const Shape leading(logits.shape().begin(), logits.shape().end() - 1);
  if (targets.shape() != leading)
    throw Error(ErrorKind::kInvalidArgument, "cross_entropy: targets " + targets.str() +
                                                 " must have the leading shape " +
                                                 shape_str(leading) + " of logits " + logits.str());
  if (logits.device() != targets.device())
    throw Error(ErrorKind::kInvalidArgument, "cross_entropy: logits " + logits.str() +
                                                 " and targets " + targets.str() +
                                                 " are on different devices");
  if (!(options.label_smoothing >= 0.0 && options.label_smoothing <= 1.0))
    throw Error(ErrorKind::kInvalidArgument,
                "cross_entropy: label_smoothing must lie in [0, 1], found " +
                    std::to_string(options.label_smoothing));
}

}  // namespace

Tensor cross_entropy(const Tensor& logits, const Tensor& targets,
                     const CrossEntropyOptions& options) {
  check_cross_entropy_arguments(logits, targets, options);
  const Device device = logits.device();
  const int64_t classes = logits.size(-1);
  const int64_t rows = targets.numel();
  const Shape logits_shape = logits.shape();
  Tensor logits32 = detail::as_f32_contiguous(logits).reshape({rows, classes});
  Tensor targets_contiguous = targets.detach().contiguous();
  Tensor row_loss = Tensor::empty({rows}, DType::kF32, device);
  Tensor row_logsumexp = Tensor::empty({rows}, DType::kF32, device);
  // On the logits' device, so that the mean needs no count on the host (kernel_signatures.hpp).
  Tensor mean_factors = Tensor::empty({2}, DType::kF32, device);
  find_kernel<CrossEntropyForwardKernel>("cross_entropy", device.type)(
      logits32, targets_contiguous, options, row_loss, row_logsumexp, mean_factors);

  Tensor out;
  {
    NoGradGuard no_grad;  // the reduction of detached losses is not part of the graph
    switch (options.reduction) {
      case LossReduction::kNone:
        out = row_loss.reshape(targets.shape());
        break;
      case LossReduction::kSum:
        out = sum(row_loss);
        break;
      case LossReduction::kMean:
        // sum * (1/c): the bits of mul_scalar(sum, 1.0 / c); NaN when no row is counted.
        out = mul(sum(row_loss), mean_factors.narrow(0, 0, 1).reshape({}));
        break;
    }
  }

  record_op("cross_entropy", {logits}, {&out},
            [logits32, targets_contiguous, row_logsumexp, options, mean_factors, rows, logits_shape,
             device](const std::vector<Tensor>& g) {
              Tensor upstream = detail::as_f32_contiguous(g[0]);
              Tensor row_grad;
              switch (options.reduction) {
                case LossReduction::kNone:
                  row_grad = upstream.reshape({rows});
                  break;
                case LossReduction::kSum:
                  row_grad = upstream.reshape({1}).expand({rows});
                  break;
                case LossReduction::kMean:
                  // upstream * (1/c), or * 0 when no row is counted (every row is ignored
                  // then and gets 0 whatever row_grad says).
                  row_grad =
                      mul(upstream.reshape({1}), mean_factors.narrow(0, 1, 1)).expand({rows});
                  break;
              }
              row_grad = row_grad.contiguous();
              Tensor grad_logits = Tensor::empty({rows, logits_shape.back()}, DType::kF32, device);
              find_kernel<CrossEntropyBackwardKernel>("cross_entropy_backward", device.type)(
                  logits32, targets_contiguous, row_logsumexp, row_grad, options, grad_logits);
              return std::vector<Tensor>{grad_logits.reshape(logits_shape)};
            });
  return out;
}

int64_t count_targets(const Tensor& targets, int64_t ignore_index) {
  detail::check_index_tensor(targets, "count_targets", "targets");
  if (targets.device().type != DeviceType::kCpu)
    throw Error(ErrorKind::kInvalidArgument,
                "count_targets: expected targets on the CPU, found " + targets.str());
  Tensor contiguous_targets = targets.detach().contiguous();
  return detail::visit_index_type(contiguous_targets, [&](auto index_type) {
    using Index = decltype(index_type);
    const Index* data = contiguous_targets.data<Index>();
    int64_t counted = 0;
    for (int64_t i = 0; i < contiguous_targets.numel(); ++i)
      counted += static_cast<int64_t>(data[i]) != ignore_index;
    return counted;
  });
}

}  // namespace patchbay::engine
