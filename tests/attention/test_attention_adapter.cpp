// The SDK adapter (patchbay/attention.hpp) on layers compiled into this test, created straight
// from their descriptors with the host's api: a bidirectional-only mixer runs the conformance
// kit's non-causal path (the "non-causal attention in a causal LM" refusal), and a layer that
// throws shows every exception becoming a status with its code and message.
#include <doctest/doctest.h>

#include <stdexcept>
#include <string>

#include "attention_fixture.hpp"
#include "patchbay/attention.hpp"

namespace {

// y = mean over all positions of x, then a [C, C] projection: sees the future by design.
class MeanMixer : public patchbay::Attention {
 public:
  static constexpr uint64_t kCapabilities = PB_ATTENTION_CAP_NONCAUSAL;
  static constexpr const char* kComplexity = "time O(T C^2)";
  MeanMixer(const patchbay::Host& host, const patchbay::ConfigView&) : ops_(host.api()->ops) {}
  void init(const pb_layer_context& ctx) override {
    patchbay::Generator g(ops_.table(), ctx.seed);
    weight_ = add_parameter("mix.weight", ops_.randn({ctx.d_model, ctx.d_model}, g) * ctx.init_std);
  }
  patchbay::Tensor forward(const patchbay::Tensor& x, bool) override {
    patchbay::Tensor mean = x.mean({1}, true).expand(x.shape());
    return (x + mean).matmul(weight_, false, true);
  }

 private:
  patchbay::Ops ops_;
  patchbay::Tensor weight_;
};
inline constexpr pb_component_descriptor kMeanMixer = patchbay::make_attention_component<MeanMixer>(
    "mean-mixer", "1.0.0", "test layer: bidirectional mean mixing");

// A causal layer whose forward throws what the config's `mode` says.
class Thrower : public patchbay::Attention {
 public:
  static constexpr uint64_t kCapabilities = PB_ATTENTION_CAP_CAUSAL;
  Thrower(const patchbay::Host&, const patchbay::ConfigView& config)
      : mode_(config.get_string("mode")) {}
  void init(const pb_layer_context&) override {}
  patchbay::Tensor forward(const patchbay::Tensor&, bool) override {
    if (mode_ == "plugin_error")
      throw patchbay::PluginError(PB_STATUS_OUT_OF_RANGE, "custom refusal");
    if (mode_ == "std") throw std::runtime_error("std failure");
    throw 42;
  }

 private:
  std::string mode_;
};
inline constexpr pb_config_field kThrowerFields[] = {
    patchbay::Field::string("mode", "\"std\"", "what forward throws")
        .choices("plugin_error|std|int"),
};
inline constexpr pb_component_descriptor kThrower = patchbay::make_attention_component<Thrower>(
    "thrower", "1.0.0", "test layer: throws", kThrowerFields);

patchbay::testing::AttentionFactory factory_for(const pb_component_descriptor& descriptor,
                                                const std::string& mode = "") {
  return [&descriptor, mode] {
    attention_test::registry();  // wires the engine's ops table into the host api
    patchbay::runtime::ComponentConfig config(descriptor);
    if (!mode.empty()) config.set_string("mode", mode);
    const pb_host_api* host = patchbay::runtime::host_api();
    void* object = nullptr;
    pb_status* st = descriptor.create(host, &config.view(), &object);
    REQUIRE(st == nullptr);
    return patchbay::testing::AttentionUnderTest(
        static_cast<const pb_attention_vtable*>(descriptor.vtable), object, host,
        [&descriptor, object] { descriptor.destroy(object); });
  };
}

}  // namespace

TEST_CASE(
    "a bidirectional-only layer passes the kit's non-causal path and is refused by a causal "
    "model") {
  const auto* vtable = static_cast<const pb_attention_vtable*>(kMeanMixer.vtable);
  CHECK(vtable->cache_kind == PB_ATTENTION_CACHE_NONE);
  CHECK((vtable->state_create == nullptr));
  CHECK((vtable->forward_step == nullptr));
  patchbay::testing::AttentionConformanceOptions options;
  patchbay::testing::check_attention_conformance(factory_for(kMeanMixer), options);

  patchbay::testing::AttentionUnderTest layer = factory_for(kMeanMixer)();
  pb_layer_context ctx = attention_test::layer_context(8, 2, 8);  // causal = 1
  pb_status* st = layer.vtable()->init(layer.instance(), &ctx);
  REQUIRE(st != nullptr);
  const std::string message = layer.host()->status_message(st);
  CHECK(layer.host()->status_code(st) == PB_STATUS_INVALID_ARGUMENT);
  CHECK(message.find("cannot be causal") != std::string::npos);
  CHECK(message.find("causal language model") != std::string::npos);
  layer.host()->status_free(st);
}

TEST_CASE("exceptions become statuses at the boundary, with codes and messages") {
  struct Case {
    const char* mode;
    pb_status_code code;
    const char* text;
  };
  for (const Case& c : {Case{"plugin_error", PB_STATUS_OUT_OF_RANGE, "custom refusal"},
                        Case{"std", PB_STATUS_INTERNAL, "std failure"},
                        Case{"int", PB_STATUS_INTERNAL, "unknown exception"}}) {
    CAPTURE(c.mode);
    patchbay::testing::AttentionUnderTest layer = factory_for(kThrower, c.mode)();
    layer.init(attention_test::layer_context(8, 2, 8));
    patchbay::Ops ops(layer.ops());
    patchbay::Tensor x = ops.zeros({1, 2, 8});
    pb_tensor* y = nullptr;
    pb_status* st = layer.vtable()->forward(layer.instance(), x.handle(), 0, &y);
    REQUIRE(st != nullptr);
    CHECK(layer.host()->status_code(st) == c.code);
    const std::string message = layer.host()->status_message(st);
    CHECK(message.find("attention forward") != std::string::npos);
    CHECK(message.find(c.text) != std::string::npos);
    layer.host()->status_free(st);
    CHECK(y == nullptr);
  }
}
