// ffn_mlp.so loaded through the host's plugin registry, as a run loads it: the SDK conformance
// kit for every activation (with and without biases, with dropout), the output against the
// formula of README.md computed with engine ops, parameter names, shapes and init statistics,
// dropout, and the refusals the host turns into patchbay::Error.
#include <doctest/doctest.h>

#include <cmath>
#include <string>
#include <vector>

#include "engine/generator.hpp"
#include "engine/ops.hpp"
#include "engine_host.hpp"
#include "patchbay/testing/feedforward_conformance.hpp"
#include "runtime/feedforward_handle.hpp"

namespace rt = patchbay::runtime;
namespace eng = patchbay::engine;
namespace pt = patchbay::testing;

namespace {

const std::vector<std::string> kActivations = {"gelu", "gelu_erf", "relu", "swiglu", "geglu"};

struct Loaded {
  rt::Registry registry{patchbay::test::engine_host_api()};
  Loaded() {
    registry.scan_file(patchbay::test::built_plugin("ffn_mlp.so"));
    REQUIRE(registry.refused().empty());
  }
  const pb_component_descriptor& mlp() { return *registry.find(PB_KIND_FEEDFORWARD, "mlp").descriptor; }
  rt::FeedForwardHandle make(rt::ComponentConfig& config) {
    return rt::FeedForwardHandle(registry.create(PB_KIND_FEEDFORWARD, "mlp", config.view()), registry.host());
  }
};

pb_layer_context context(int64_t d_model, int64_t d_ff, double init_std, uint64_t seed) {
  pb_layer_context ctx = pt::feedforward_test_context();
  ctx.d_model = d_model;
  ctx.d_ff = d_ff;
  ctx.init_std = init_std;
  ctx.residual_init_std = init_std / std::sqrt(2.0 * static_cast<double>(ctx.n_layers));
  ctx.seed = seed;
  return ctx;
}

std::vector<std::string> names_of(const std::vector<rt::FeedForwardHandle::Parameter>& params) {
  std::vector<std::string> names;
  for (const auto& p : params) names.push_back(p.name);
  return names;
}

const eng::Tensor& param(const std::vector<rt::FeedForwardHandle::Parameter>& params, const std::string& name) {
  for (const auto& p : params)
    if (p.name == name) return p.tensor;
  FAIL("no parameter " << name);
  return params.front().tensor;
}

// README.md's formula with engine ops, on x2 [N, C].
eng::Tensor reference(const std::string& activation, const std::vector<rt::FeedForwardHandle::Parameter>& params,
                      const eng::Tensor& x) {
  const eng::Tensor x2 = x.reshape({-1, x.size(-1)});
  eng::Tensor h = eng::matmul(x2, param(params, "fc.weight"), false, true) + param(params, "fc.bias");
  if (activation == "gelu") h = eng::gelu_tanh(h);
  if (activation == "gelu_erf") h = eng::gelu_erf(h);
  if (activation == "relu") h = eng::relu(h);
  if (activation == "swiglu") {
    h = eng::silu(eng::matmul(x2, param(params, "gate.weight"), false, true) + param(params, "gate.bias")) * h;
  }
  if (activation == "geglu") {  // T5 v1.1's gated-gelu: gelu_new(wi_0 x) * wi_1 x
    h = eng::gelu_tanh(eng::matmul(x2, param(params, "gate.weight"), false, true) + param(params, "gate.bias")) * h;
  }
  return (eng::matmul(h, param(params, "proj.weight"), false, true) + param(params, "proj.bias")).reshape(x.shape());
}

double max_abs_diff(const eng::Tensor& a, const eng::Tensor& b) {
  const std::vector<float> va = a.to_vector(), vb = b.to_vector();
  REQUIRE(va.size() == vb.size());
  double worst = 0;
  for (size_t i = 0; i < va.size(); ++i) worst = std::max(worst, std::fabs(static_cast<double>(va[i]) - vb[i]));
  return worst;
}

}  // namespace

TEST_CASE("mlp conforms for every activation, with and without biases, through the host") {
  Loaded loaded;
  pt::FeedForwardConformanceOptions options;
  // With input seed 7 one ReLU pre-activation lies within eps (1e-3) of its kink, where a
  // central difference straddles the kink and disagrees with the one-sided derivative (the
  // kit's header explains); seed 8 keeps every pre-activation of every case away from it.
  options.input_seed = 8;
  for (const std::string& activation : kActivations) {
    for (bool bias : {true, false}) {
      CAPTURE(activation);
      CAPTURE(bias);
      rt::ComponentConfig config(loaded.mlp());
      config.set_string("activation", activation);
      config.set_bool("bias", bias);
      config.set_float("dropout", 0.1);  // training forwards run with it; checks use eval
      const pt::FeedForwardConformanceReport report =
          pt::check_feedforward_conformance(loaded.mlp(), &config.view(), loaded.registry.host(), options);
      CHECK_MESSAGE(report.ok(), report.message());
    }
  }
}

TEST_CASE("mlp output equals the README formula computed with engine ops") {
  Loaded loaded;
  eng::Generator gen(99);
  const eng::Tensor x = eng::mul_scalar(eng::randn({2, 5, 8}, gen), 2.0);
  std::vector<eng::Tensor> outputs;
  for (const std::string& activation : kActivations) {
    CAPTURE(activation);
    rt::ComponentConfig config(loaded.mlp());
    config.set_string("activation", activation);
    rt::FeedForwardHandle ffn = loaded.make(config);
    ffn.init(context(8, 16, 1.0, 5));
    const auto params = ffn.parameters();
    // Biases start at zero; give them values so the bias terms are checked too.
    for (const auto& p : params) {
      if (p.name.ends_with(".bias")) {
        eng::Tensor b = p.tensor;
        eng::copy_(b, eng::mul_scalar(eng::randn(b.shape(), gen), 0.5));
      }
    }
    const rt::FeedForwardHandle::Output out = ffn.forward(x, false);
    CHECK(!out.aux_loss.defined());
    CHECK(out.stats.empty());
    CHECK(max_abs_diff(out.y, reference(activation, params, x)) < 1e-4);
    outputs.push_back(out.y);
  }
  // The two GELUs differ visibly at these magnitudes, so the check above tells them apart.
  CHECK(max_abs_diff(outputs[0], outputs[1]) > 1e-3);
}

TEST_CASE("mlp parameter names, shapes, init statistics and seeding") {
  Loaded loaded;
  SUBCASE("gelu with biases") {
    rt::ComponentConfig config(loaded.mlp());
    rt::FeedForwardHandle ffn = loaded.make(config);
    ffn.init(context(64, 256, 0.02, 11));
    const auto params = ffn.parameters();
    CHECK(names_of(params) == std::vector<std::string>{"fc.weight", "fc.bias", "proj.weight", "proj.bias"});
    CHECK(param(params, "fc.weight").shape() == eng::Shape{256, 64});
    CHECK(param(params, "fc.bias").shape() == eng::Shape{256});
    CHECK(param(params, "proj.weight").shape() == eng::Shape{64, 256});
    CHECK(param(params, "proj.bias").shape() == eng::Shape{64});
    auto std_of = [](const eng::Tensor& t) {
      const std::vector<float> v = t.to_vector();
      double s = 0, s2 = 0;
      for (float f : v) s += f, s2 += static_cast<double>(f) * f;
      const double mean = s / static_cast<double>(v.size());
      return std::sqrt(s2 / static_cast<double>(v.size()) - mean * mean);
    };
    // 16384 draws each: the sample std is within ~1% of the true one.
    CHECK(std_of(param(params, "fc.weight")) == doctest::Approx(0.02).epsilon(0.05));
    CHECK(std_of(param(params, "proj.weight")) == doctest::Approx(0.02 / std::sqrt(8.0)).epsilon(0.05));
    for (const char* bias : {"fc.bias", "proj.bias"}) {
      for (float v : param(params, bias).to_vector()) REQUIRE(v == 0.0f);
    }
  }
  SUBCASE("swiglu without biases has gate.weight and no biases") {
    rt::ComponentConfig config(loaded.mlp());
    config.set_string("activation", "swiglu");
    config.set_bool("bias", false);
    rt::FeedForwardHandle ffn = loaded.make(config);
    ffn.init(context(8, 12, 0.02, 11));
    const auto params = ffn.parameters();
    CHECK(names_of(params) == std::vector<std::string>{"fc.weight", "gate.weight", "proj.weight"});
    CHECK(param(params, "gate.weight").shape() == eng::Shape{12, 8});  // d_ff as given, no 2/3
  }
  SUBCASE("swiglu with biases") {
    rt::ComponentConfig config(loaded.mlp());
    config.set_string("activation", "swiglu");
    rt::FeedForwardHandle ffn = loaded.make(config);
    ffn.init(context(8, 12, 0.02, 11));
    CHECK(names_of(ffn.parameters()) ==
          std::vector<std::string>{"fc.weight", "fc.bias", "gate.weight", "gate.bias", "proj.weight", "proj.bias"});
  }
  SUBCASE("same seed, same model; another seed, another model") {
    rt::ComponentConfig config(loaded.mlp());
    rt::FeedForwardHandle a = loaded.make(config), b = loaded.make(config), c = loaded.make(config);
    a.init(context(8, 16, 0.02, 3));
    b.init(context(8, 16, 0.02, 3));
    c.init(context(8, 16, 0.02, 4));
    CHECK(a.parameters()[0].tensor.to_vector() == b.parameters()[0].tensor.to_vector());
    CHECK(a.parameters()[0].tensor.to_vector() != c.parameters()[0].tensor.to_vector());
  }
}

TEST_CASE("mlp dropout: training only, on the output, scaled by 1/(1-p)") {
  Loaded loaded;
  eng::Generator gen(5);
  const eng::Tensor x = eng::randn({2, 8, 64}, gen);
  rt::ComponentConfig plain_config(loaded.mlp());
  rt::FeedForwardHandle plain = loaded.make(plain_config);
  plain.init(context(64, 128, 0.5, 8));
  rt::ComponentConfig dropped_config(loaded.mlp());
  dropped_config.set_float("dropout", 0.5);
  rt::FeedForwardHandle dropped = loaded.make(dropped_config);
  dropped.init(context(64, 128, 0.5, 8));

  const std::vector<float> eval = plain.forward(x, false).y.to_vector();
  CHECK(dropped.forward(x, false).y.to_vector() == eval);  // eval: no dropout
  CHECK(plain.forward(x, true).y.to_vector() == eval);     // p = 0: training changes nothing
  const std::vector<float> trained = dropped.forward(x, true).y.to_vector();
  size_t zeros = 0;
  for (size_t i = 0; i < trained.size(); ++i) {
    if (trained[i] == 0.0f) {
      ++zeros;
    } else {
      REQUIRE(trained[i] == doctest::Approx(2.0 * eval[i]).epsilon(1e-5));
    }
  }
  // 1024 outputs, p = 0.5: the count of dropped ones is 512 +- 16 (one std).
  CHECK(zeros > 400);
  CHECK(zeros < 624);

  rt::ComponentConfig all_config(loaded.mlp());
  all_config.set_float("dropout", 1.0);
  rt::FeedForwardHandle all = loaded.make(all_config);
  all.init(context(64, 128, 0.5, 8));
  for (float v : all.forward(x, true).y.to_vector()) REQUIRE(v == 0.0f);
}

TEST_CASE("mlp refusals become patchbay::Error naming the component and the file") {
  Loaded loaded;
  rt::ComponentConfig config(loaded.mlp());
  auto message_of = [](auto&& call) {
    try {
      call();
    } catch (const patchbay::Error& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  SUBCASE("x of the wrong width") {
    rt::FeedForwardHandle ffn = loaded.make(config);
    ffn.init(context(8, 16, 0.02, 1));
    eng::Generator gen(1);
    const std::string message = message_of([&] { ffn.forward(eng::randn({2, 3, 9}, gen), false); });
    CHECK(message.find("feedforward 'mlp'") != std::string::npos);
    CHECK(message.find("ffn_mlp.so") != std::string::npos);
    CHECK(message.find("x must be [B, T, 8] but is [2, 3, 9]") != std::string::npos);
  }
  SUBCASE("forward before init") {
    rt::FeedForwardHandle ffn = loaded.make(config);
    eng::Generator gen(1);
    CHECK(message_of([&] { ffn.forward(eng::randn({2, 3, 8}, gen), false); }).find("forward() before init()") !=
          std::string::npos);
  }
  SUBCASE("a context it cannot serve") {
    rt::FeedForwardHandle ffn = loaded.make(config);
    pb_layer_context ctx = context(8, 0, 0.02, 1);
    CHECK(message_of([&] { ffn.init(ctx); }).find("d_ff must be > 0") != std::string::npos);
  }
  SUBCASE("an activation outside the declared choices is refused by the host's config") {
    CHECK_THROWS_AS(config.set_string("activation", "tanh"), patchbay::Error);
    CHECK_THROWS_AS(config.set_float("dropout", 1.5), patchbay::Error);
  }
}

TEST_CASE("mlp with bf16 parameters runs on bf16 input and stays near the f32 layer") {
  Loaded loaded;
  eng::Generator gen(21);
  const eng::Tensor x = eng::randn({2, 4, 16}, gen);
  rt::ComponentConfig config(loaded.mlp());
  rt::FeedForwardHandle f32 = loaded.make(config), bf16 = loaded.make(config);
  pb_layer_context ctx = context(16, 32, 0.5, 6);
  f32.init(ctx);
  ctx.param_dtype = PB_DTYPE_BF16;
  bf16.init(ctx);
  for (const auto& p : bf16.parameters()) CHECK(p.tensor.dtype() == eng::DType::kBF16);
  const eng::Tensor y = bf16.forward(eng::to_dtype(x, eng::DType::kBF16), false).y;
  CHECK(y.dtype() == eng::DType::kBF16);
  // Same draws rounded to bf16 (8 bits of mantissa): outputs of magnitude ~3 agree to ~0.1.
  CHECK(max_abs_diff(y, f32.forward(x, false).y) < 0.15);
}
