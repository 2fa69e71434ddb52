// bias_activation(x, bias, act) = act(x + bias) as one op (ops.hpp, ops table version 7): the
// kernels in kernels/cpu/bias_activation.cpp do the forward in one pass over x and the
// backward in one pass that also sums the bias gradient, where add + activation take two
// passes each way and a separate column sum. Compute in f32 like the other ops (bf16/f16
// widened once, results rounded once). The backward recomputes x + bias, so the op keeps x
// and bias alive, not a pre-activation copy.
#include "patchbay/kernels/bias_activation.hpp"

#include "common/error.hpp"
#include "engine/dispatch.hpp"
#include "engine/kernel_signatures.hpp"
#include "engine/ops/op_helpers.hpp"

namespace patchbay::engine {
namespace {

using kernel::BiasActivationBackwardKernel;
using kernel::BiasActivationForwardKernel;

namespace k = patchbay::kernels;

k::BiasActivationKind kernel_kind(FusedActivation act) {
  return act == FusedActivation::kRelu ? k::BiasActivationKind::kRelu
                                       : k::BiasActivationKind::kGeluTanh;
}

void forward_cpu(FusedActivation act, const Tensor& x32, const Tensor& b32, Tensor& out,
                 int64_t rows, int64_t cols) {
  k::bias_activation_forward(kernel_kind(act), x32.data<float>(), b32.data<float>(),
                             out.data<float>(), rows, cols);
}
PATCHBAY_REGISTER_KERNEL(BiasActivationForwardKernel, "bias_activation", DeviceType::kCpu,
                         forward_cpu);

void backward_cpu(FusedActivation act, const Tensor& x32, const Tensor& b32, const Tensor& g32,
                  Tensor& dx, Tensor& dbias, int64_t rows, int64_t cols) {
  k::bias_activation_backward(kernel_kind(act), x32.data<float>(), b32.data<float>(),
                              g32.data<float>(), dx.data<float>(), dbias.data<float>(), rows, cols);
}
PATCHBAY_REGISTER_KERNEL(BiasActivationBackwardKernel, "bias_activation_backward", DeviceType::kCpu,
                         backward_cpu);

}  // namespace

Tensor bias_activation(const Tensor& x, const Tensor& bias, FusedActivation activation) {
  detail::check_same(x, bias, "bias_activation");
  if (x.dim() < 1 || bias.dim() != 1 || bias.size(0) != x.size(-1))
    throw Error(ErrorKind::kInvalidArgument,
                "bias_activation: expected x [..., N] and bias [N], found x " + x.str() +
                    " and bias " + bias.str());
  const int64_t cols = x.size(-1);
  const int64_t rows = cols == 0 ? 0 : x.numel() / cols;
  const Tensor x32 = detail::as_f32_contiguous(x);
  const Tensor b32 = detail::as_f32_contiguous(bias);
  Tensor out = Tensor::empty(x.shape(), DType::kF32, x.device());
  if (x.numel() > 0)
    find_kernel<BiasActivationForwardKernel>("bias_activation", x.device().type)(
        activation, x32, b32, out, rows, cols);
  out = detail::from_f32(out, x.dtype());
  record_op(
      "bias_activation", {x, bias}, {&out},
      [activation, x32, b32, rows, cols, x_dtype = x.dtype(),
       b_dtype = bias.dtype()](const std::vector<Tensor>& g) {
        const Tensor g32 = detail::as_f32_contiguous(g[0]);
        Tensor dx = Tensor::empty(x32.shape(), DType::kF32, x32.device());
        Tensor dbias = zeros({cols}, DType::kF32, x32.device());
        if (rows > 0)
          find_kernel<BiasActivationBackwardKernel>("bias_activation_backward", x32.device().type)(
              activation, x32, b32, g32, dx, dbias, rows, cols);
        return std::vector<Tensor>{detail::from_f32(dx, x_dtype), detail::from_f32(dbias, b_dtype)};
      });
  return out;
}

}  // namespace patchbay::engine
