// The "geglu" feed-forward component (Shazeer 2020, "GLU Variants Improve Transformer"):
//   x [B, T, C] -> h = gelu(x W_gate^T) * (x W_up^T) [B, T, d_ff] -> y = h W_down^T [B, T, C]
// with optional biases on the three projections. Parameters: gate.weight [d_ff, C] and
// up.weight [d_ff, C] ~ N(0, init_std), down.weight [C, d_ff] ~ N(0, residual_init_std),
// biases 0, drawn in that order from one generator seeded with ctx.seed. Every position is
// mapped on its own (CAP_CAUSAL), so it fits a causal LM. The engine's autograd gives backward.
#pragma once

#include <patchbay/feedforward.hpp>

namespace geglu_feedforward {

class Geglu : public patchbay::FeedForward {
 public:
  static constexpr uint64_t kCapabilities = PB_FEEDFORWARD_CAP_CAUSAL;

  Geglu(const patchbay::Host& host, const patchbay::ConfigView& config);

  void init(const pb_layer_context& ctx) override;
  Output forward(const patchbay::Tensor& x, bool training) override;

 private:
  patchbay::Host host_;
  bool bias_;  // config `bias`
  int64_t d_model_ = 0;
  patchbay::Tensor gate_weight_, gate_bias_, up_weight_, up_bias_, down_weight_, down_bias_;
};

inline constexpr pb_config_field kGegluFields[] = {
    patchbay::Field::boolean("bias", "false", "add biases to the gate, up and down projections"),
};

inline constexpr pb_component_descriptor kGeglu = patchbay::make_feedforward_component<Geglu>(
    "geglu", "1.0.0", "gated feed-forward block: gelu(gate(x)) * up(x) -> down", kGegluFields);

}  // namespace geglu_feedforward
