// ffn_moe.so through the host registry: the SDK conformance kit for every router and option,
// E = 1 equal to ffn_mlp's dense MLP (forward and gradients), auxiliary-loss known answers,
// capacity dropping on a hand-built routing, expert choice (and its refusal in a causal
// model), and config refusals.
#include <cmath>
#include <string>
#include <vector>

#include "engine/autograd.hpp"
#include "engine/generator.hpp"
#include "moe_helpers.hpp"

using namespace moe_test;

namespace {

struct Case {
  const char* router;
  int64_t top_k;
  bool renormalize;
  bool dropless;
  bool shared_expert;
  const char* activation;
  double eval_capacity_factor;
};

}  // namespace

TEST_CASE("moe conforms for every router and option, through the host") {
  Loaded loaded;
  const Case cases[] = {
      {"topk", 2, true, false, false, "gelu", 2.0},
      {"topk", 2, false, false, false, "relu", 2.0},
      {"switch", 0, true, false, false, "gelu", 2.0},
      {"noisy_topk", 2, true, false, false, "gelu_erf", 2.0},
      {"topk", 3, true, true, true, "swiglu", 2.0},
      {"topk", 2, true, false, false, "gelu", 0.5},
      {"switch", 1, false, false, true, "swiglu", 0.5},
      {"topk", 2, true, true, false, "swiglu", 2.0},
      {"noisy_topk", 1, true, false, true, "gelu", 0.5},
  };
  for (const Case& c : cases) {
    CAPTURE(c.activation);
    CAPTURE(c.router);
    CAPTURE(c.top_k);
    CAPTURE(c.dropless);
    CAPTURE(c.shared_expert);
    CAPTURE(c.eval_capacity_factor);
    rt::ComponentConfig config(loaded.descriptor("moe"));
    config.set_string("router", c.router);
    config.set_int("experts", 4);
    // Narrow experts: the finite differences perturb every parameter twice per path, so the
    // parameter count sets this test's time.
    config.set_int("expert_d_ff", 4);
    config.set_int("top_k", c.top_k);
    config.set_bool("renormalize", c.renormalize);
    config.set_bool("dropless", c.dropless);
    config.set_bool("shared_expert", c.shared_expert);
    config.set_string("activation", c.activation);
    config.set_float("eval_capacity_factor", c.eval_capacity_factor);
    config.set_float("router_jitter", 0.01);  // training forwards run with it; checks use eval
    config.set_float("dropout", 0.1);
    pt::FeedForwardConformanceOptions options;
    options.input_seed = 8;
    // Capacity couples the tokens of a batch (in the causal order): only dropless layers map
    // every position independently.
    options.check_position_independence = c.dropless;
    // Experts no token chose, and every expert through the router-only aux_loss, get no
    // gradient from the engine: they must match finite differences of zero.
    options.gradcheck.missing_gradient_is_zero = true;
    // SwiGLU outputs (a product of two projections, plus a shared expert) are large enough
    // that f32 rounding of y over eps = 1e-3 reaches atol; 3e-3 keeps the difference quotient
    // clear of it (measured: 1e-3 fails by 1.6e-3 on smooth parameters, 3e-3 and 1e-2 pass).
    if (std::string(c.activation) == "swiglu") options.gradcheck.eps = 3e-3;
    const pt::FeedForwardConformanceReport report = pt::check_feedforward_conformance(
        loaded.descriptor("moe"), &config.view(), loaded.registry.host(), options);
    CHECK_MESSAGE(report.ok(), report.message());
  }
}

TEST_CASE("E = 1, k = 1, no dropping equals the dense MLP: forward and gradients") {
  Loaded loaded;
  for (const std::string activation : {"gelu", "swiglu"}) {
    CAPTURE(activation);
    rt::ComponentConfig moe_config(loaded.descriptor("moe"));
    moe_config.set_int("experts", 1);
    moe_config.set_string("router", "switch");
    moe_config.set_bool("dropless", true);
    moe_config.set_float("balance_loss_coef", 0.0);
    moe_config.set_float("z_loss_coef", 0.0);
    moe_config.set_string("activation", activation);
    rt::ComponentConfig mlp_config(loaded.descriptor("mlp"));
    mlp_config.set_string("activation", activation);
    rt::FeedForwardHandle moe = loaded.make("moe", moe_config);
    rt::FeedForwardHandle mlp = loaded.make("mlp", mlp_config);
    moe.init(context(8, 16, 3));
    mlp.init(context(8, 16, 4));
    const auto moe_params = moe.parameters();
    const auto mlp_params = mlp.parameters();
    eng::Generator gen(5);
    for (const auto& p : mlp_params) {  // random values (biases too), copied into expert 0
      eng::Tensor dst = p.tensor;
      eng::copy_(dst, eng::randn(p.tensor.shape(), gen) * 0.5);
      eng::Tensor expert = param(moe_params, "experts.0." + p.name);
      eng::copy_(expert, p.tensor);
    }
    const eng::Tensor x_value = eng::randn({2, 5, 8}, gen);
    const eng::Tensor probe = eng::randn({2, 5, 8}, gen);
    std::vector<eng::Tensor> x_grads;
    std::vector<eng::Tensor> outputs;
    for (rt::FeedForwardHandle* layer : {&moe, &mlp}) {
      eng::Tensor x = x_value.detach().contiguous() * 1.0;
      x = x.detach();
      x.set_requires_grad(true);
      const rt::FeedForwardHandle::Output out = layer->forward(x, false);
      CHECK(!out.aux_loss.defined());
      eng::backward(eng::sum(out.y * probe));
      x_grads.push_back(x.grad());
      outputs.push_back(out.y);
    }
    CHECK(max_abs_diff(outputs[0], outputs[1]) < 1e-5);
    CHECK(max_abs_diff(x_grads[0], x_grads[1]) < 1e-5);
    for (const auto& p : mlp_params) {
      CAPTURE(p.name);
      CHECK(max_abs_diff(param(moe_params, "experts.0." + p.name).grad(), p.tensor.grad()) < 1e-5);
    }
    // The router sees a softmax over one expert (p = 1): its gradient is zero.
    const std::vector<float> router_grad = param(moe_params, "router.weight").grad().to_vector();
    for (float g : router_grad) CHECK(std::fabs(g) < 1e-6f);
  }
}

TEST_CASE("Switch balancing loss and z-loss: known answers") {
  Loaded loaded;
  SUBCASE("uniform routing gives exactly the coefficient; z = c_z (ln E)^2") {
    for (const int64_t k : {1, 2}) {
      CAPTURE(k);
      rt::ComponentConfig config(loaded.descriptor("moe"));
      config.set_int("experts", 4);
      config.set_int("top_k", k);
      config.set_float("balance_loss_coef", 0.03);
      config.set_float("z_loss_coef", 0.002);
      rt::FeedForwardHandle layer = loaded.make("moe", config);
      layer.init(context(8, 16, 9));
      eng::Tensor router = param(layer.parameters(), "router.weight");
      eng::copy_(router, eng::zeros(router.shape()));  // every token: p = 1/4 for each expert
      eng::Generator gen(1);
      const rt::FeedForwardHandle::Output out = layer.forward(eng::randn({2, 3, 8}, gen), false);
      const double z = 0.002 * std::log(4.0) * std::log(4.0);
      CHECK(stat(out, "balance_loss")[0] == doctest::Approx(0.03).epsilon(1e-6));
      CHECK(stat(out, "z_loss")[0] == doctest::Approx(z).epsilon(1e-6));
      CHECK(out.aux_loss.item() == doctest::Approx(0.03 + z).epsilon(1e-6));
      CHECK(stat(out, "router_entropy")[0] == doctest::Approx(std::log(4.0)).epsilon(1e-6));
    }
  }
  SUBCASE("a hand-computed imbalanced routing") {
    // C = 1, E = 2, router rows [1] and [-1]: logits (a, -a), p0 = sigmoid(2a). Tokens
    // a = ln(3)/2 three times (p0 = 3/4, argmax 0) and -ln(3)/2 once (p0 = 1/4, argmax 1):
    // f = (3/4, 1/4), P = (5/8, 3/8), L = 2 (3/4 · 5/8 + 1/4 · 3/8) = 1.125.
    // z: logsumexp(a, -a) = ln(√3 + 1/√3) = ln(4/√3) for every token.
    rt::ComponentConfig config(loaded.descriptor("moe"));
    config.set_int("experts", 2);
    config.set_string("router", "switch");
    config.set_float("balance_loss_coef", 0.01);
    config.set_float("z_loss_coef", 0.001);
    rt::FeedForwardHandle layer = loaded.make("moe", config);
    layer.init(context(1, 4, 2));
    eng::Tensor router = param(layer.parameters(), "router.weight");
    eng::copy_(router, eng::Tensor::from_vector({1.0f, -1.0f}, {2, 1}));
    const float a = static_cast<float>(std::log(3.0) / 2);
    const rt::FeedForwardHandle::Output out =
        layer.forward(eng::Tensor::from_vector({a, a, -a, a}, {1, 4, 1}), false);
    const double lse = std::log(4.0 / std::sqrt(3.0));
    CHECK(stat(out, "balance_loss")[0] == doctest::Approx(0.01 * 1.125).epsilon(1e-5));
    CHECK(stat(out, "z_loss")[0] == doctest::Approx(0.001 * lse * lse).epsilon(1e-5));
    CHECK(out.aux_loss.item() == doctest::Approx(0.01 * 1.125 + 0.001 * lse * lse).epsilon(1e-5));
    CHECK(stat(out, "expert_load") == std::vector<float>{0.75f, 0.25f});
  }
}

TEST_CASE("capacity drops the latest positions, and a dropped token's output is exactly zero") {
  // C = 2, router rows (1, 0) and (-1, 0), every token's first feature = 1: all 8 tokens
  // (B = 2, T = 4) pick expert 0. Capacity ceil(1.0 · 8 · 1 / 2) = 4 keeps positions 0 and 1
  // of both sequences (position-major order) and drops positions 2 and 3.
  Loaded loaded;
  auto make = [&](bool dropless) {
    rt::ComponentConfig config(loaded.descriptor("moe"));
    config.set_int("experts", 2);
    config.set_string("router", "switch");
    config.set_float("eval_capacity_factor", 1.0);
    config.set_bool("dropless", dropless);
    rt::FeedForwardHandle layer = loaded.make("moe", config);
    layer.init(context(2, 8, 6));
    eng::Tensor router = param(layer.parameters(), "router.weight");
    eng::copy_(router, eng::Tensor::from_vector({1.0f, 0.0f, -1.0f, 0.0f}, {2, 2}));
    return layer;
  };
  rt::FeedForwardHandle capped = make(false);
  rt::FeedForwardHandle dropless = make(true);
  std::vector<float> xs;
  for (int i = 0; i < 8; ++i) {
    xs.push_back(1.0f);
    xs.push_back(0.1f * static_cast<float>(i));
  }
  const eng::Tensor x = eng::Tensor::from_vector(xs, {2, 4, 2});
  const rt::FeedForwardHandle::Output a = capped.forward(x, false);
  const rt::FeedForwardHandle::Output b = dropless.forward(x, false);
  CHECK(stat(a, "dropped_fraction")[0] == doctest::Approx(0.5));
  CHECK(stat(b, "dropped_fraction")[0] == doctest::Approx(0.0));
  CHECK(stat(a, "expert_load") == std::vector<float>{1.0f, 0.0f});
  const std::vector<float> ya = a.y.to_vector(), yb = b.y.to_vector();
  for (int64_t bb = 0; bb < 2; ++bb) {
    for (int64_t t = 0; t < 4; ++t) {
      for (int64_t c = 0; c < 2; ++c) {
        const size_t i = static_cast<size_t>((bb * 4 + t) * 2 + c);
        CAPTURE(bb);
        CAPTURE(t);
        if (t >= 2) {
          CHECK(ya[i] == 0.0f);
          CHECK(yb[i] != 0.0f);
        } else {
          CHECK(ya[i] == doctest::Approx(yb[i]).epsilon(1e-6));
        }
      }
    }
  }
}

TEST_CASE("expert choice: conforms off a causal model, is refused in one, and is not causal") {
  Loaded loaded;
  rt::ComponentConfig config(loaded.descriptor("moe_expert_choice"));
  config.set_int("experts", 2);
  SUBCASE("conformance with capacity = every token (c = E): position-independent") {
    config.set_float("capacity_factor", 2.0);
    pt::FeedForwardConformanceOptions options;
    options.context.causal = 0;
    options.gradcheck.missing_gradient_is_zero = true;  // experts through the z-loss
    const pt::FeedForwardConformanceReport report = pt::check_feedforward_conformance(
        loaded.descriptor("moe_expert_choice"), &config.view(), loaded.registry.host(), options);
    CHECK_MESSAGE(report.ok(), report.message());
  }
  SUBCASE("the host refuses it for a causal model") {
    rt::FeedForwardHandle layer = loaded.make("moe_expert_choice", config);
    CHECK_THROWS_WITH(layer.init(context(8, 16, 1, /*causal=*/true)),
                      doctest::Contains("cannot be used in a causal language model"));
  }
  SUBCASE("the plugin itself refuses a causal context, naming the alternative") {
    const pb_component_descriptor& d = loaded.descriptor("moe_expert_choice");
    const pb_host_api* host = loaded.registry.host();
    void* instance = nullptr;
    REQUIRE(d.create(host, &config.view(), &instance) == nullptr);
    const pb_layer_context ctx = context(8, 16, 1, true);
    pb_status* status = static_cast<const pb_feedforward_vtable*>(d.vtable)->init(instance, &ctx);
    REQUIRE(status != nullptr);
    const std::string message = host->status_message(status);
    host->status_free(status);
    d.destroy(instance);
    CHECK(message.find("cannot be used in a causal language model") != std::string::npos);
    CHECK(message.find("kind = \"moe\"") != std::string::npos);
    CHECK(message.find("masked-LM") != std::string::npos);
  }
  SUBCASE("with fewer picks than tokens, a later token changes an earlier token's output") {
    config.set_float("capacity_factor",
                     0.5);  // each expert picks ceil(0.5 · 8 / 2) = 2 of 8 tokens
    rt::FeedForwardHandle layer = loaded.make("moe_expert_choice", config);
    layer.init(context(8, 16, 1, false));
    // Token 7 along ±(w0 − w1): S[7, 0] = sigmoid(±40 |w0 − w1|²), near 0 in the base input
    // (expert 1's top pick) and near 1 in the moved one (expert 0's top pick), so each expert
    // gives one of its two picks among tokens 0..6 to a different token.
    const std::vector<float> rw = param(layer.parameters(), "router.weight").to_vector();  // [2, 8]
    eng::Generator gen(3);
    std::vector<float> xv = eng::randn({1, 8, 8}, gen).to_vector();
    auto set_last = [&](float sign) {
      for (size_t c = 0; c < 8; ++c) xv[7 * 8 + c] = sign * 40.0f * (rw[c] - rw[8 + c]);
      return eng::Tensor::from_vector(xv, {1, 8, 8});
    };
    const rt::FeedForwardHandle::Output base = layer.forward(set_last(-1.0f), false);
    CHECK(stat(base, "dropped_fraction")[0] >= 0.5f);  // at most 4 of 8 tokens picked
    const rt::FeedForwardHandle::Output moved = layer.forward(set_last(1.0f), false);
    CHECK(max_abs_diff(base.y.slice(1, 0, 7), moved.y.slice(1, 0, 7)) > 1e-6);
  }
}

TEST_CASE("moe refuses inconsistent router settings with a message") {
  Loaded loaded;
  rt::ComponentConfig switch_k2(loaded.descriptor("moe"));
  switch_k2.set_string("router", "switch");
  switch_k2.set_int("top_k", 2);
  CHECK_THROWS_WITH(loaded.make("moe", switch_k2), doctest::Contains("top-1"));
  rt::ComponentConfig too_many(loaded.descriptor("moe"));
  too_many.set_int("experts", 2);
  too_many.set_int("top_k", 3);
  CHECK_THROWS_WITH(loaded.make("moe", too_many), doctest::Contains("exceeds experts"));
}

TEST_CASE("gradcheck: missing_gradient_is_zero checks an unreached input against zero") {
  // f(x, w) = 2x: w never reaches the output. By default that is a failure; with the option,
  // w's zero gradient agrees with its zero finite differences, while a reached input with a
  // wrong backward would still fail (x's gradient is checked as always).
  const pb_ops_table* ops = patchbay::test::engine_host_api()->ops;
  const patchbay::Ops make(ops);
  patchbay::Tensor x = make.from_vector(std::vector<float>{1.0f, -2.0f, 0.5f}, {3});
  patchbay::Tensor w = make.from_vector(std::vector<float>{0.3f, 0.7f}, {2});
  x.requires_grad(true);
  w.requires_grad(true);
  auto f = [](const std::vector<patchbay::Tensor>& in) { return in[0] * 2.0; };
  const pt::GradcheckResult strict = pt::gradcheck(ops, f, {x, w});
  CHECK_FALSE(strict.ok);
  CHECK(strict.message.find("received no gradient") != std::string::npos);
  pt::GradcheckOptions lenient;
  lenient.missing_gradient_is_zero = true;
  const pt::GradcheckResult ok = pt::gradcheck(ops, f, {x, w}, lenient);
  CHECK_MESSAGE(ok.ok, ok.message);
}
