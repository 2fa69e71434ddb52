// The "mlp" component (see mlp.hpp and README.md). Everything is composed of host ops through
// patchbay::Tensor, so the engine's autograd provides the backward pass.
#include "mlp.hpp"

#include <string>
#include <vector>

namespace patchbay_ffn_mlp {
namespace {

using patchbay::PluginError;
using patchbay::Tensor;

// Dropout draws come from their own stream so that they never shift the init draws.
constexpr uint64_t kDropoutStream = 0x9e3779b97f4a7c15ull;

Activation parse_activation(const std::string& name) {
  if (name == "gelu") return Activation::kGeluTanh;
  if (name == "gelu_erf") return Activation::kGeluErf;
  if (name == "relu") return Activation::kRelu;
  if (name == "swiglu") return Activation::kSwiGlu;
  if (name == "geglu") return Activation::kGeGlu;
  throw PluginError(PB_STATUS_INVALID_ARGUMENT,
                    "activation '" + name + "' is not one of gelu, gelu_erf, relu, swiglu, geglu");
}

std::string shape_text(const std::vector<int64_t>& shape) {
  std::string s = "[";
  for (size_t i = 0; i < shape.size(); ++i) s += (i == 0 ? "" : ", ") + std::to_string(shape[i]);
  return s + "]";
}

void require_positive(const char* name, int64_t value) {
  if (value <= 0) {
    throw PluginError(PB_STATUS_INVALID_ARGUMENT,
                      std::string("layer context ") + name + " must be > 0, got " + std::to_string(value));
  }
}

}  // namespace

Mlp::Mlp(const patchbay::Host& host, const patchbay::ConfigView& config)
    : host_(host),
      activation_(parse_activation(config.get_string("activation"))),
      bias_(config.get_bool("bias")),
      dropout_(config.get_float("dropout")) {}

void Mlp::init(const pb_layer_context& ctx) {
  require_positive("d_model", ctx.d_model);
  require_positive("d_ff", ctx.d_ff);
  if (!(ctx.init_std >= 0) || !(ctx.residual_init_std >= 0)) {
    throw PluginError(PB_STATUS_INVALID_ARGUMENT, "layer context init_std and residual_init_std must be >= 0");
  }
  if (ctx.device_type != PB_DEVICE_CPU && !patchbay::has_device_tensors(host_.api()->ops)) {
    throw PluginError(
        PB_STATUS_UNSUPPORTED,
        "mlp runs on a device through the host's to_device (ops table version 11); this host's "
        "table is version " +
            std::to_string(host_.api()->ops->version));
  }
  if (ctx.param_dtype != PB_DTYPE_F32 && ctx.param_dtype != PB_DTYPE_BF16 && ctx.param_dtype != PB_DTYPE_F16) {
    throw PluginError(PB_STATUS_INVALID_ARGUMENT, "param_dtype must be a float dtype (f32, bf16, f16)");
  }
  d_model_ = ctx.d_model;
  const patchbay::Ops ops(host_.api()->ops);
  const patchbay::TensorParallel tp = patchbay::tensor_parallel_of(ctx, ops.table());
  if (ctx.d_ff % tp.size != 0) {
    throw PluginError(PB_STATUS_INVALID_ARGUMENT,
                      "mlp splits its hidden units over the tensor-parallel ranks, but d_ff " +
                          std::to_string(ctx.d_ff) + " is not divisible by the " +
                          std::to_string(tp.size) +
                          " ranks; choose model.d_ff a multiple of the rank count (-np)");
  }
  split_ = tp.size > 1;
  if (split_ && !patchbay::has_tensor_parallel_ops(ops.table())) {
    throw PluginError(
        PB_STATUS_UNSUPPORTED,
        "tensor parallelism needs the host's tp_copy_to_region / tp_reduce_from_region (ops "
        "table version 9); this host's table is version " +
            std::to_string(ops.table()->version));
  }
  patchbay::NoGradGuard no_grad(ops.table());
  patchbay::Generator init_gen(ops.table(), ctx.seed);
  // Drawn on the CPU, then moved to the layer's device: one seed, one model on every device.
  auto on_device = [&](const Tensor& t) {
    return patchbay::to_device(t, ctx.device_type, ctx.device_index);
  };
  auto normal = [&](int64_t rows, int64_t cols, double std) {
    return ops.randn({rows, cols}, init_gen, ctx.param_dtype) * std;
  };
  auto zeros = [&](int64_t n) { return on_device(ops.zeros({n}, ctx.param_dtype)); };
  // Draw order fc, gate, proj: fixed, so a seed always gives the same model. Under tensor
  // parallelism each rank draws the full matrices and keeps its shard (the same start as W = 1).
  const int64_t c = ctx.d_model;
  const int64_t f = ctx.d_ff;
  const int64_t local_f = f / tp.size;
  // Column-parallel fc / gate rows and row-parallel proj columns are marked for checkpoints.
  fc_weight_ = register_parameter("fc.weight", on_device(tp.shard(normal(f, c, ctx.init_std), 0)));
  tp.mark_partitioned("fc.weight", 0);
  if (bias_) {
    fc_bias_ = register_parameter("fc.bias", zeros(local_f));
    tp.mark_partitioned("fc.bias", 0);
  }
  if (activation_ == Activation::kSwiGlu || activation_ == Activation::kGeGlu) {
    gate_weight_ =
        register_parameter("gate.weight", on_device(tp.shard(normal(f, c, ctx.init_std), 0)));
    tp.mark_partitioned("gate.weight", 0);
    if (bias_) {
      gate_bias_ = register_parameter("gate.bias", zeros(local_f));
      tp.mark_partitioned("gate.bias", 0);
    }
  }
  proj_weight_ = register_parameter("proj.weight",
                                    on_device(tp.shard(normal(c, f, ctx.residual_init_std), 1)));
  if (bias_) proj_bias_ = register_parameter("proj.bias", zeros(c));
  tp.mark_partitioned("proj.weight", 1);
  dropout_gen_ = std::make_unique<patchbay::Generator>(ops.table(), ctx.seed ^ kDropoutStream);
}

patchbay::FeedForward::Output Mlp::forward(const Tensor& x, bool training) {
  const std::vector<int64_t> shape = x.shape();
  if (shape.size() != 3 || shape[2] != d_model_) {
    throw PluginError(PB_STATUS_INVALID_ARGUMENT, "mlp: x must be [B, T, " + std::to_string(d_model_) +
                                                      "] but is " + shape_text(shape));
  }
  // [B*T, C]; tensor parallelism: f before the column-parallel fc / gate (backward sums dL/dx).
  const Tensor x2 =
      split_ ? patchbay::tp_copy_to_region(x.reshape({-1, d_model_})) : x.reshape({-1, d_model_});
  // fc, its bias and GELU (tanh) / ReLU as one linear layer (ops table version 10; composed
  // of the matmul and the fused bias_activation, version 7, in training): when decoding, the
  // bias and activation are applied as the product writes each output. On an older host
  // patchbay::linear composes the same function itself.
  const bool fused = activation_ == Activation::kGeluTanh || activation_ == Activation::kRelu;
  Tensor hidden;  // [B*T, d_ff]
  if (fused) {
    const pb_unary_op act = activation_ == Activation::kRelu ? PB_UNARY_RELU : PB_UNARY_GELU_TANH;
    hidden = patchbay::linear(x2, fc_weight_, fc_bias_, &act);
  } else {
    hidden = patchbay::linear(x2, fc_weight_, fc_bias_);  // [N, C] x [F, C]^T (+ bias)
    if (activation_ == Activation::kGeluErf) {
      hidden = hidden.gelu(false);
    } else {  // gated: silu (SwiGLU) or tanh GELU (GeGLU) of the gate, times fc's output
      const Tensor gate = patchbay::linear(x2, gate_weight_, gate_bias_);
      hidden = (activation_ == Activation::kSwiGlu ? gate.silu() : gate.gelu(true)) * hidden;
    }
  }
  // [B*T, F/W] x [C, F/W]^T: this rank's partial output; g sums the ranks' before the bias.
  Tensor y;  // [B, T, C]
  if (split_) {
    Tensor partial = patchbay::tp_reduce_from_region(hidden.matmul(proj_weight_, false, true));
    y = (proj_bias_.defined() ? partial + proj_bias_ : partial).reshape(shape);
  } else {
    y = patchbay::linear(hidden, proj_weight_, proj_bias_).reshape(shape);
  }
  if (training && dropout_ >= 1.0) {
    y = y * 0.0;  // everything dropped; the engine's dropout takes p in [0, 1) only
  } else if (training && dropout_ > 0) {
    y = y.dropout(dropout_, *dropout_gen_, true);
  }
  return Output{std::move(y), Tensor(), {}};
}

}  // namespace patchbay_ffn_mlp
