// The "moe_expert_choice" component: expert-choice routing (Zhou et al. 2022). Each expert
// picks its `capacity` highest-scoring tokens of the batch (S = softmax(x Wgᵀ) over experts,
// top-capacity over tokens of Sᵀ), with capacity = ceil(capacity_factor · N / E) (at most N),
// and adds gate S[n, e] · expert_e(x_n) to the tokens it picked; a token no expert picked gets
// zero (the residual carries it). Balanced by construction: no load-balancing loss.
//
// Bidirectional: whether a token is picked depends on every other token of the batch, later
// positions included, so it lacks PB_FEEDFORWARD_CAP_CAUSAL and a causal LM refuses it (the
// host at model build; init() also refuses a causal context with its own message). It becomes
// usable with a bidirectional objective (masked-LM, planned in another issue).
#pragma once

#include "moe_layer.hpp"

namespace patchbay_ffn_moe {

class ExpertChoiceLayer : public patchbay::FeedForward {
 public:
  static constexpr uint64_t kCapabilities = 0;  // not causal: see above

  ExpertChoiceLayer(const patchbay::Host& host, const patchbay::ConfigView& config);
  void init(const pb_layer_context& ctx) override;
  Output forward(const patchbay::Tensor& x, bool training) override;

 private:
  patchbay::Host host_;
  ExpertSettings experts_settings_;
  double capacity_factor_;
  int64_t d_model_ = 0;
  std::optional<Router> router_;
  std::vector<ExpertMlp> experts_;
  std::unique_ptr<patchbay::Generator> dropout_gen_;
};

inline constexpr pb_config_field kExpertChoiceFields[] = {
    PATCHBAY_FFN_MOE_EXPERT_FIELDS,
    patchbay::Field::real(
        "capacity_factor", "2.0",
        "tokens per expert = ceil(factor * tokens / E), at most tokens (Zhou et al.: c = 2)")
        .range(1e-6, 1e6),
};

inline constexpr pb_component_descriptor kExpertChoice =
    patchbay::make_feedforward_component<ExpertChoiceLayer>(
        "moe_expert_choice", "1.0.0",
        "expert-choice mixture of experts (bidirectional: refused in a causal LM)",
        kExpertChoiceFields);

}  // namespace patchbay_ffn_moe
