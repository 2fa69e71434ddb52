// A test-only plugin with two layers a causal language model must refuse: an attention that
// only runs bidirectionally (no PB_ATTENTION_CAP_CAUSAL) and a feed-forward whose routing
// mixes positions (no PB_FEEDFORWARD_CAP_CAUSAL). Both pass x through; the model must refuse
// them before running anything.
#include <patchbay/attention.hpp>
#include <patchbay/feedforward.hpp>
#include <patchbay/plugin.hpp>

namespace model_test_layers {

class Bidirectional : public patchbay::Attention {
 public:
  static constexpr uint64_t kCapabilities = PB_ATTENTION_CAP_NONCAUSAL;
  Bidirectional(const patchbay::Host&, const patchbay::ConfigView&) {}
  void init(const pb_layer_context&) override {}
  patchbay::Tensor forward(const patchbay::Tensor& x, bool) override { return x; }
};

class ExpertChoice : public patchbay::FeedForward {
 public:
  static constexpr uint64_t kCapabilities = 0;
  ExpertChoice(const patchbay::Host&, const patchbay::ConfigView&) {}
  void init(const pb_layer_context&) override {}
  Output forward(const patchbay::Tensor& x, bool) override { return Output{x, {}, {}}; }
};

inline constexpr pb_component_descriptor kBidirectional =
    patchbay::make_attention_component<Bidirectional>(
        "bidirectional_test", "1.0.0", "test: bidirectional-only attention (identity)");
inline constexpr pb_component_descriptor kExpertChoice =
    patchbay::make_feedforward_component<ExpertChoice>(
        "expert_choice_test", "1.0.0",
        "test: feed-forward without the causal capability (identity)");

}  // namespace model_test_layers

PATCHBAY_PLUGIN("model-test-layers", "1.0.0",
                PATCHBAY_COMPONENT_LIST(&model_test_layers::kBidirectional,
                                        &model_test_layers::kExpertChoice));
