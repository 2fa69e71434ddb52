// A test-only plugin whose layers show which options they received: an attention
// "window_probe" with a required `window` option and a feed-forward "width_probe" with a
// `width` option, each registering one parameter whose length is that option. Both pass x
// through unchanged (trivially causal: position t's output is its own input), so a model
// built from them shows in its parameter shapes which options reached which block.
#include <patchbay/attention.hpp>
#include <patchbay/feedforward.hpp>
#include <patchbay/plugin.hpp>

namespace option_probe_layers {

class WindowProbe : public patchbay::Attention {
 public:
  static constexpr uint64_t kCapabilities = PB_ATTENTION_CAP_CAUSAL;
  WindowProbe(const patchbay::Host& host, const patchbay::ConfigView& config)
      : host_(host), window_(config.get_int("window")) {}
  void init(const pb_layer_context&) override {
    add_parameter("window_probe", patchbay::Ops(host_.api()->ops).zeros({window_}));
  }
  patchbay::Tensor forward(const patchbay::Tensor& x, bool) override { return x; }

 private:
  patchbay::Host host_;
  int64_t window_;
};

class WidthProbe : public patchbay::FeedForward {
 public:
  static constexpr uint64_t kCapabilities = PB_FEEDFORWARD_CAP_CAUSAL;
  WidthProbe(const patchbay::Host& host, const patchbay::ConfigView& config)
      : host_(host), width_(config.get_int("width")) {}
  void init(const pb_layer_context&) override {
    register_parameter("width_probe", patchbay::Ops(host_.api()->ops).zeros({width_}));
  }
  Output forward(const patchbay::Tensor& x, bool) override { return Output{x, {}, {}}; }

 private:
  patchbay::Host host_;
  int64_t width_;
};

inline constexpr pb_config_field kWindowFields[] = {
    patchbay::Field::integer("window", nullptr, "the probe's parameter length")
        .required()
        .range(1, 4096),
};
inline constexpr pb_config_field kWidthFields[] = {
    patchbay::Field::integer("width", "3", "the probe's parameter length").range(1, 4096),
};

inline constexpr pb_component_descriptor kWindowProbe =
    patchbay::make_attention_component<WindowProbe>(
        "window_probe", "1.0.0", "test: identity attention showing its `window` option",
        kWindowFields);
inline constexpr pb_component_descriptor kWidthProbe =
    patchbay::make_feedforward_component<WidthProbe>(
        "width_probe", "1.0.0", "test: identity feed-forward showing its `width` option",
        kWidthFields);

}  // namespace option_probe_layers

PATCHBAY_PLUGIN("option-probe-layers", "1.0.0",
                PATCHBAY_COMPONENT_LIST(&option_probe_layers::kWindowProbe,
                                        &option_probe_layers::kWidthProbe));
