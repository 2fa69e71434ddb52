// The "mlp" feed-forward component: y = dropout(proj(act(fc(x)))), or gated: SwiGLU
// y = dropout(proj(silu(gate(x)) * fc(x))), GeGLU (T5 v1.1's gated-gelu, tanh GELU)
// y = dropout(proj(gelu_tanh(gate(x)) * fc(x))). Exact formulas, parameter names and init are in
// README.md; the config schema is kMlpFields below.
#pragma once

#include <memory>
#include <patchbay/feedforward.hpp>
#include <patchbay/tensor_parallel.hpp>
#include <string>

namespace patchbay_ffn_mlp {

enum class Activation { kGeluTanh, kGeluErf, kRelu, kSwiGlu, kGeGlu };

class Mlp : public patchbay::FeedForward {
 public:
  // Every position is mapped on its own: usable in a causal LM.
  // Tensor parallelism (ctx.tp_size = W > 1, Megatron): rank r holds hidden units
  // [r F/W, (r+1) F/W): fc.weight / gate.weight [F/W, C] and their biases [F/W] are
  // column-parallel (marked dim 0), proj.weight [C, F/W] row-parallel (dim 1), proj.bias [C]
  // replicated. x passes tp_copy_to_region (f); the partial outputs are summed by
  // tp_reduce_from_region (g) before proj.bias is added once. Every activation is
  // element-wise on the hidden units, so each rank applies it to its own slice.
  static constexpr uint64_t kCapabilities =
      PB_FEEDFORWARD_CAP_CAUSAL | PB_FEEDFORWARD_CAP_TENSOR_PARALLEL;

  Mlp(const patchbay::Host& host, const patchbay::ConfigView& config);

  void init(const pb_layer_context& ctx) override;
  Output forward(const patchbay::Tensor& x, bool training) override;

 private:
  patchbay::Host host_;
  Activation activation_;
  bool bias_;
  double dropout_;
  int64_t d_model_ = 0;
  bool split_ = false;  // tensor parallelism: W > 1
  // Parameters (registered in init; undefined bias tensors when bias = false).
  patchbay::Tensor fc_weight_, fc_bias_, gate_weight_, gate_bias_, proj_weight_, proj_bias_;
  std::unique_ptr<patchbay::Generator> dropout_gen_;  // seeded from ctx.seed in init
};

inline constexpr pb_config_field kMlpFields[] = {
    patchbay::Field::string("activation", "\"gelu\"",
                            "gelu (tanh approximation, GPT-2), gelu_erf, relu, swiglu or geglu (gated: "
                            "silu / tanh-GELU of gate.weight's output times fc's)")
        .choices("gelu|gelu_erf|relu|swiglu|geglu"),
    patchbay::Field::boolean("bias", "true", "add biases to fc, gate and proj"),
    patchbay::Field::real("dropout", "0.0", "dropout probability on the output, training only").range(0.0, 1.0),
};

inline constexpr pb_component_descriptor kMlp = patchbay::make_feedforward_component<Mlp>(
    "mlp", "1.0.0", "dense feed-forward block: fc -> activation (gelu, gelu_erf, relu, swiglu, geglu) -> proj", kMlpFields);

}  // namespace patchbay_ffn_mlp
