// linear(x, weight, bias, act) = act(x · weightᵀ + bias) (ops.hpp, ops table version 10).
//
// Decoding: a batch-1 (or beam) step multiplies a few rows by every weight matrix once, a pass
// bound by memory bandwidth, and the composed form then pays an op of its own for the bias
// add and for the activation, each a fresh tensor and a pass over cold outputs (GPT-2 f32
// decoding: ~2.5 us per bias add, 4 of them per layer with the MLP's GELU). Here the skinny
// matmul kernel adds the bias and applies the activation as it writes each output, by the
// thread that summed it. That path is taken only where nothing records a gradient and bf16
// autocast is off (whose matmul would round x and weight to bf16 first): everywhere else the
// op is matmul followed by bias_activation / add / the activation, so training, its
// gradients and its speed are those ops' own.
#include "engine/autocast.hpp"
#include "engine/autograd.hpp"
#include "engine/ops/low_rank_adapter_internal.hpp"
#include "engine/ops/op_helpers.hpp"
#include "patchbay/kernels/skinny_matmul.hpp"

namespace patchbay::engine {
namespace {

namespace k = patchbay::kernels;

Tensor composed(const Tensor& x, const Tensor& weight, const Tensor& bias,
                LinearActivation activation) {
  const Tensor y = matmul(x, weight, false, true);
  if (bias.defined()) {
    if (activation == LinearActivation::kNone) return y + bias;
    return bias_activation(y, bias,
                           activation == LinearActivation::kRelu ? FusedActivation::kRelu
                                                                 : FusedActivation::kGeluTanh);
  }
  if (activation == LinearActivation::kRelu) return relu(y);
  if (activation == LinearActivation::kGeluTanh) return gelu_tanh(y);
  return y;
}

// The decoding shapes the skinny kernel takes with its epilogue (see the file comment).
bool fused_path(const Tensor& x, const Tensor& weight, const Tensor& bias,
                LinearActivation activation) {
  if (!x.defined() || !weight.defined() || x.device().type != DeviceType::kCpu ||
      weight.device() != x.device() || x.dtype() != DType::kF32 || x.dim() < 1 ||
      weight.dim() != 2 || (weight.dtype() != DType::kF32 && weight.dtype() != DType::kBF16) ||
      !weight.is_contiguous())
    return false;
  const int64_t k_dim = x.size(-1), n = weight.size(0);
  if (k_dim < 1 || n < 1 || weight.size(1) != k_dim || x.numel() == 0 ||
      x.numel() / k_dim > k::kSkinnyMaxRows)
    return false;
  if (bias.defined() && (bias.device() != x.device() || bias.dtype() != DType::kF32 ||
                         bias.dim() != 1 || bias.size(0) != n || !bias.is_contiguous()))
    return false;
  if (!bias.defined() && activation != LinearActivation::kNone) return false;
  if (autocast_dtype() == DType::kBF16) return false;
  if (detail::carries_low_rank_adapter(weight)) return false;  // matmul applies the adapter
  return !(grad_enabled() && any_requires_grad({x, weight, bias}));
}

}  // namespace

Tensor linear(const Tensor& x, const Tensor& weight, const Tensor& bias,
              LinearActivation activation) {
  if (!fused_path(x, weight, bias, activation)) return composed(x, weight, bias, activation);
  const Tensor rows = x.contiguous();
  const int64_t k_dim = x.size(-1), n = weight.size(0);
  Shape out_shape(x.shape().begin(), x.shape().end() - 1);
  out_shape.push_back(n);
  Tensor out = Tensor::empty(out_shape, DType::kF32, x.device());
  k::SkinnyMatmulParams params;
  params.x = rows.data<float>();
  params.x_row_stride = k_dim;
  params.w = weight.data_ptr();
  params.w_type =
      weight.dtype() == DType::kBF16 ? k::SkinnyWeightType::kBF16 : k::SkinnyWeightType::kF32;
  params.w_row_stride = k_dim;
  params.y = out.data<float>();
  params.y_row_stride = n;
  params.m = x.numel() / k_dim;
  params.n = n;
  params.k = k_dim;
  params.bias = bias.defined() ? bias.data<float>() : nullptr;
  params.activation = activation == LinearActivation::kRelu       ? k::SkinnyActivation::kRelu
                      : activation == LinearActivation::kGeluTanh ? k::SkinnyActivation::kGeluTanh
                                                                  : k::SkinnyActivation::kNone;
  const std::string error = k::skinny_matmul(params);
  if (!error.empty()) throw Error(ErrorKind::kInternal, "linear: " + error);
  return out;
}

}  // namespace patchbay::engine
