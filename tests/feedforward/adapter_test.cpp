// The SDK's feed-forward adapter (patchbay/feedforward.hpp), the host's FeedForwardHandle and
// the conformance kit, on small layers written in this file exactly as a plugin would write
// them: statuses and codes at the boundary, call-order refusals, the causal refusal, aux_loss
// and statistics passing through, a wrong-shaped y refused by the host, and the kit passing a
// correct layer and failing one that mixes positions.
#include <doctest/doctest.h>

#include <stdexcept>
#include <string>
#include <vector>

#include "engine/autograd.hpp"
#include "engine/generator.hpp"
#include "engine/ops.hpp"
#include "engine_host.hpp"
#include "patchbay/feedforward.hpp"
// A plugin may provide several kinds: every C++ layer of the SDK compiles in one unit.
#include "patchbay/attention.hpp"
#include "patchbay/optimizer.hpp"
#include "patchbay/parallelism.hpp"
#include "patchbay/sampler.hpp"
#include "patchbay/tokenizer.hpp"
#include "patchbay/testing/feedforward_conformance.hpp"
#include "runtime/feedforward_handle.hpp"

namespace rt = patchbay::runtime;
namespace eng = patchbay::engine;
namespace pt = patchbay::testing;
using patchbay::Tensor;

namespace {

// y = x * scale (one parameter [C]); aux_loss = 0.01 * mean(y^2); one statistic.
class ScaleLayer : public patchbay::FeedForward {
 public:
  static constexpr uint64_t kCapabilities = PB_FEEDFORWARD_CAP_CAUSAL;
  ScaleLayer(const patchbay::Host& host, const patchbay::ConfigView&) : host_(host) {}
  void init(const pb_layer_context& ctx) override {
    const patchbay::Ops ops(host_.api()->ops);
    patchbay::Generator gen(ops.table(), ctx.seed);
    scale_ = register_parameter("scale", ops.uniform({ctx.d_model}, gen, 0.5, 1.5));
  }
  Output forward(const Tensor& x, bool) override {
    Tensor y = x * scale_;
    Tensor aux = (y * y).mean() * 0.01;
    return Output{y, aux, {Stat{"load", {0.25f, 0.75f}}}};
  }

 private:
  patchbay::Host host_;
  Tensor scale_;
};

// Fails on purpose in each callback.
class ThrowingLayer : public patchbay::FeedForward {
 public:
  static constexpr uint64_t kCapabilities = PB_FEEDFORWARD_CAP_CAUSAL;
  ThrowingLayer(const patchbay::Host&, const patchbay::ConfigView&) {}
  void init(const pb_layer_context& ctx) override {
    if (ctx.d_ff == 0) throw patchbay::PluginError(PB_STATUS_OUT_OF_RANGE, "d_ff 0");
  }
  Output forward(const Tensor&, bool) override { throw std::runtime_error("boom"); }
};

// Not causal, and y mixes positions: y = x + mean over T.
class MixingLayer : public patchbay::FeedForward {
 public:
  MixingLayer(const patchbay::Host&, const patchbay::ConfigView&) {}
  void init(const pb_layer_context&) override {}
  Output forward(const Tensor& x, bool) override { return Output{x + x.mean({1}, true), Tensor(), {}}; }
};

// Returns y one column short.
class ShortLayer : public patchbay::FeedForward {
 public:
  static constexpr uint64_t kCapabilities = PB_FEEDFORWARD_CAP_CAUSAL;
  ShortLayer(const patchbay::Host&, const patchbay::ConfigView&) {}
  void init(const pb_layer_context&) override {}
  Output forward(const Tensor& x, bool) override { return Output{x.slice(2, 0, x.size(2) - 1), Tensor(), {}}; }
};

constexpr pb_component_descriptor kScale = patchbay::make_feedforward_component<ScaleLayer>("scale", "1.0.0", "test");
constexpr pb_component_descriptor kThrowing =
    patchbay::make_feedforward_component<ThrowingLayer>("throwing", "1.0.0", "test");
constexpr pb_component_descriptor kMixing = patchbay::make_feedforward_component<MixingLayer>("mixing", "1.0.0", "test");
constexpr pb_component_descriptor kShort = patchbay::make_feedforward_component<ShortLayer>("short", "1.0.0", "test");

const pb_config_view kNoConfig{sizeof(pb_config_view), nullptr, 0};

rt::ComponentInstance instance_of(const pb_component_descriptor& d) {
  void* object = nullptr;
  REQUIRE(d.create(patchbay::test::engine_host_api(), &kNoConfig, &object) == nullptr);
  return rt::ComponentInstance(nullptr, &d, object, "in-process");
}

// Code and message of a status (freed).
std::pair<pb_status_code, std::string> outcome(pb_status* st) {
  const pb_host_api* host = patchbay::test::engine_host_api();
  if (st == nullptr) return {PB_STATUS_OK, ""};
  std::pair<pb_status_code, std::string> out{host->status_code(st), host->status_message(st)};
  host->status_free(st);
  return out;
}

std::string error_of(auto&& call) {
  try {
    call();
  } catch (const patchbay::Error& e) {
    return e.what();
  }
  return "no error";
}

}  // namespace

TEST_CASE("the adapter turns exceptions and call-order mistakes into statuses") {
  const auto* vt = static_cast<const pb_feedforward_vtable*>(kThrowing.vtable);
  rt::ComponentInstance throwing = instance_of(kThrowing);
  pb_layer_context ctx = pt::feedforward_test_context();
  const patchbay::Ops ops(patchbay::test::engine_host_api()->ops);
  patchbay::Generator gen(ops.table(), 1);
  const Tensor x_tensor = ops.randn({1, 2, 8}, gen);
  pb_tensor* x = x_tensor.handle();
  pb_feedforward_result result{};
  result.struct_size = sizeof result;

  auto before_init = outcome(vt->forward(throwing.get(), x, 0, &result));
  CHECK(before_init.first == PB_STATUS_INVALID_ARGUMENT);
  CHECK(before_init.second.find("forward() before init()") != std::string::npos);

  ctx.d_ff = 0;
  auto refused = outcome(vt->init(throwing.get(), &ctx));
  CHECK(refused.first == PB_STATUS_OUT_OF_RANGE);  // PluginError keeps its code
  CHECK(refused.second == "feedforward init: d_ff 0");
  ctx.d_ff = 16;
  CHECK(outcome(vt->init(throwing.get(), &ctx)).first == PB_STATUS_OK);
  CHECK(outcome(vt->init(throwing.get(), &ctx)).first == PB_STATUS_INVALID_ARGUMENT);  // twice

  auto thrown = outcome(vt->forward(throwing.get(), x, 0, &result));
  CHECK(thrown.first == PB_STATUS_INTERNAL);  // std::runtime_error
  CHECK(thrown.second == "feedforward forward: boom");
  CHECK(result.y == nullptr);

  const char* name = nullptr;
  pb_tensor* t = nullptr;
  CHECK(outcome(vt->parameter(throwing.get(), 0, &name, &t)).first == PB_STATUS_OUT_OF_RANGE);
}

TEST_CASE("the handle passes aux_loss, statistics and parameters through") {
  rt::FeedForwardHandle ffn(instance_of(kScale), patchbay::test::engine_host_api());
  ffn.init(pt::feedforward_test_context());
  const auto params = ffn.parameters();
  REQUIRE(params.size() == 1);
  CHECK(params[0].name == "scale");
  CHECK(params[0].tensor.requires_grad());
  eng::Generator gen(2);
  const eng::Tensor x = eng::randn({2, 3, 8}, gen);
  const rt::FeedForwardHandle::Output out = ffn.forward(x, true);
  const eng::Tensor expected = x * params[0].tensor;
  CHECK(out.y.to_vector() == expected.to_vector());
  REQUIRE(out.aux_loss.defined());
  CHECK(out.aux_loss.item() == doctest::Approx(0.01 * eng::mean(expected * expected).item()));
  REQUIRE(out.stats.size() == 1);
  CHECK(out.stats[0].name == "load");
  CHECK(out.stats[0].values == std::vector<float>{0.25f, 0.75f});
  // The parameter is the layer's own tensor: gradients flow into it.
  eng::backward(eng::sum(out.y + out.aux_loss));  // aux broadcasts over y
  CHECK(params[0].tensor.grad().defined());
}

TEST_CASE("the host refuses a non-causal layer in a causal model and a wrong-shaped y") {
  rt::FeedForwardHandle mixing(instance_of(kMixing), patchbay::test::engine_host_api());
  pb_layer_context ctx = pt::feedforward_test_context();
  CHECK(error_of([&] { mixing.init(ctx); }).find("does not declare PB_FEEDFORWARD_CAP_CAUSAL") != std::string::npos);
  ctx.causal = 0;
  mixing.init(ctx);  // fine outside a causal model

  rt::FeedForwardHandle short_y(instance_of(kShort), patchbay::test::engine_host_api());
  short_y.init(pt::feedforward_test_context());
  eng::Generator gen(3);
  const std::string message = error_of([&] { short_y.forward(eng::randn({2, 3, 8}, gen), false); });
  CHECK(message.find("feedforward 'short' (in-process)") != std::string::npos);
  CHECK(message.find("y must have x's shape") != std::string::npos);
}

TEST_CASE("the conformance kit passes a correct layer and fails broken ones") {
  const pb_host_api* host = patchbay::test::engine_host_api();
  const pt::FeedForwardConformanceReport good = pt::check_feedforward_conformance(kScale, &kNoConfig, host);
  CHECK_MESSAGE(good.ok(), good.message());

  pt::FeedForwardConformanceOptions options;
  options.context.causal = 0;
  const pt::FeedForwardConformanceReport mixing = pt::check_feedforward_conformance(kMixing, &kNoConfig, host, options);
  CHECK(mixing.message().find("positions: perturbing position (b 0, t 0) changed the output at (b 0, t 1)") !=
        std::string::npos);

  const pt::FeedForwardConformanceReport short_y = pt::check_feedforward_conformance(kShort, &kNoConfig, host);
  CHECK(short_y.message().find("forward: y is [2, 3, 7], expected x's shape [2, 3, 8]") != std::string::npos);

  const pt::FeedForwardConformanceReport throwing = pt::check_feedforward_conformance(kThrowing, &kNoConfig, host);
  CHECK(throwing.message().find("feedforward forward: boom") != std::string::npos);
}
