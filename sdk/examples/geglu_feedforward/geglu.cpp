// Geglu: parameters and forward through the host's ops table (see geglu.hpp for the formula).
#include "geglu.hpp"

#include <string>
#include <vector>

namespace geglu_feedforward {

using patchbay::PluginError;
using patchbay::Tensor;

Geglu::Geglu(const patchbay::Host& host, const patchbay::ConfigView& config)
    : host_(host), bias_(config.get_bool("bias")) {}

void Geglu::init(const pb_layer_context& ctx) {
  if (ctx.d_model <= 0 || ctx.d_ff <= 0)
    throw PluginError(PB_STATUS_INVALID_ARGUMENT, "geglu needs d_model > 0 and d_ff > 0");
  if (ctx.device_type != PB_DEVICE_CPU)
    throw PluginError(PB_STATUS_UNSUPPORTED, "geglu creates its parameters on the CPU only");
  d_model_ = ctx.d_model;
  const patchbay::Ops ops(host_.api()->ops);
  patchbay::NoGradGuard no_grad(ops.table());
  patchbay::Generator gen(ops.table(), ctx.seed);
  const int64_t c = ctx.d_model, f = ctx.d_ff;
  auto normal = [&](int64_t rows, int64_t cols, double std) {
    return ops.randn({rows, cols}, gen, ctx.param_dtype) * std;
  };
  gate_weight_ = register_parameter("gate.weight", normal(f, c, ctx.init_std));
  up_weight_ = register_parameter("up.weight", normal(f, c, ctx.init_std));
  down_weight_ = register_parameter("down.weight", normal(c, f, ctx.residual_init_std));
  if (bias_) {
    gate_bias_ = register_parameter("gate.bias", ops.zeros({f}, ctx.param_dtype));
    up_bias_ = register_parameter("up.bias", ops.zeros({f}, ctx.param_dtype));
    down_bias_ = register_parameter("down.bias", ops.zeros({c}, ctx.param_dtype));
  }
}

patchbay::FeedForward::Output Geglu::forward(const Tensor& x, bool /*training*/) {
  const std::vector<int64_t> shape = x.shape();
  if (shape.size() != 3 || shape[2] != d_model_)
    throw PluginError(PB_STATUS_INVALID_ARGUMENT,
                      "geglu: x must be [B, T, " + std::to_string(d_model_) + "], found rank " +
                          std::to_string(shape.size()) +
                          (shape.size() == 3 ? " with width " + std::to_string(shape[2]) : ""));
  auto linear = [](const Tensor& in, const Tensor& w, const Tensor& b) {
    Tensor y = in.matmul(w, false, true);  // [N, in] x [out, in]^T = [N, out]
    return b.defined() ? y + b : y;
  };
  const Tensor x2 = x.reshape({-1, d_model_});  // [B*T, C]
  const Tensor hidden = linear(x2, gate_weight_, gate_bias_).gelu() * linear(x2, up_weight_, up_bias_);
  return Output{linear(hidden, down_weight_, down_bias_).reshape(shape), Tensor(), {}};
}

}  // namespace geglu_feedforward
