// One expert MLP; see expert_mlp.hpp. Composed of host ops: the engine's autograd gives the
// backward pass.
#include "expert_mlp.hpp"

namespace patchbay_ffn_moe {

using patchbay::PluginError;
using patchbay::Tensor;

Activation parse_activation(const std::string& name) {
  if (name == "gelu") return Activation::kGeluTanh;
  if (name == "gelu_erf") return Activation::kGeluErf;
  if (name == "relu") return Activation::kRelu;
  if (name == "swiglu") return Activation::kSwiGlu;
  throw PluginError(PB_STATUS_INVALID_ARGUMENT,
                    "activation '" + name + "' is not one of gelu, gelu_erf, relu, swiglu");
}

ExpertMlp::ExpertMlp(const patchbay::Ops& ops, patchbay::Generator& gen, const ExpertShape& shape,
                     const std::string& prefix, double init_std, double residual_init_std,
                     pb_dtype dtype, const RegisterParameter& add)
    : shape_(shape) {
  const int64_t c = shape.d_model, f = shape.d_hidden;
  auto normal = [&](int64_t rows, int64_t cols, double std) {
    return ops.randn({rows, cols}, gen, dtype) * std;
  };
  fc_weight_ = add(prefix + ".fc.weight", normal(f, c, init_std));
  if (shape.bias) fc_bias_ = add(prefix + ".fc.bias", ops.zeros({f}, dtype));
  if (shape.activation == Activation::kSwiGlu) {
    gate_weight_ = add(prefix + ".gate.weight", normal(f, c, init_std));
    if (shape.bias) gate_bias_ = add(prefix + ".gate.bias", ops.zeros({f}, dtype));
  }
  proj_weight_ = add(prefix + ".proj.weight", normal(c, f, residual_init_std));
  if (shape.bias) proj_bias_ = add(prefix + ".proj.bias", ops.zeros({c}, dtype));
}

Tensor ExpertMlp::linear(const Tensor& x, const Tensor& w, const Tensor& b) {
  Tensor y = x.matmul(w, false, true);  // [M, in] x [out, in]^T = [M, out]
  return b.defined() ? y + b : y;
}

Tensor ExpertMlp::forward(const Tensor& rows) const {
  Tensor hidden = linear(rows, fc_weight_, fc_bias_);  // [M, F]
  switch (shape_.activation) {
    case Activation::kGeluTanh:
      hidden = hidden.gelu(true);
      break;
    case Activation::kGeluErf:
      hidden = hidden.gelu(false);
      break;
    case Activation::kRelu:
      hidden = hidden.relu();
      break;
    case Activation::kSwiGlu:
      hidden = linear(rows, gate_weight_, gate_bias_).silu() * hidden;
      break;
  }
  return linear(hidden, proj_weight_, proj_bias_);  // [M, C]
}

}  // namespace patchbay_ffn_moe
