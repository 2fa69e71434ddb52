// lion: the fused loop against two hand-computed steps (the sign taken of the interpolation,
// the momentum kept with beta2), the component through the SDK's optimizer conformance kit
// (known answers from a double reference, skipping, resume, sharding) and its config checks.
#include "lion.hpp"

#include <doctest/doctest.h>

#include <map>
#include <vector>

#include "optimizer_test_host.hpp"
#include "patchbay/testing/optimizer_conformance.hpp"
#include "runtime/component_config.hpp"

namespace ob = optimizers_basic;
namespace pt = patchbay::testing;

namespace {

// lr 0.1, beta1 0.9, beta2 0.99, weight_decay 0.1; p0 = [1, -2, 0.5, 3], m0 = 0.
// Step 1, g = [0.5, -1, 2, 0]: c = 0.1 g -> sign [1, -1, 1, 0]; p = 0.99 p - 0.1 sign
//   = [0.89, -1.88, 0.395, 2.97]; m = 0.01 g = [0.005, -0.01, 0.02, 0].
// Step 2, g = [-0.25, 0.5, 1, 4]: c = 0.9 m + 0.1 g = [-0.0205, 0.041, 0.118, 0.4] (element 0:
//   the gradient outweighs the momentum) -> sign [-1, 1, 1, 1];
//   p = 0.99 p - 0.1 sign = [0.9811, -1.9612, 0.29105, 2.8403];
//   m = 0.99 m + 0.01 g = [0.00245, -0.0049, 0.0298, 0.04].
const std::vector<float> kStart = {1.0f, -2.0f, 0.5f, 3.0f};
const std::vector<std::vector<float>> kGrads = {{0.5f, -1.0f, 2.0f, 0.0f}, {-0.25f, 0.5f, 1.0f, 4.0f}};
const std::vector<std::vector<double>> kAfter = {{0.89, -1.88, 0.395, 2.97},
                                                 {0.9811, -1.9612, 0.29105, 2.8403}};

struct LionReference {  // lion-pytorch's update in double
  ob::LionSettings settings;
  std::map<size_t, std::vector<double>> m;
  void operator()(size_t, size_t i, std::vector<double>& p, const std::vector<float>& g, double lr,
                  const pt::OptimizerParamSpec& spec) {
    const double step_lr = lr * spec.lr_scale;
    const double wd = settings.weight_decay * spec.weight_decay_scale;
    auto& mi = m[i];
    mi.resize(p.size(), 0.0);
    for (size_t k = 0; k < p.size(); ++k) {
      const double c = settings.beta1 * mi[k] + (1 - settings.beta1) * g[k];
      const double sign = c > 0 ? 1.0 : (c < 0 ? -1.0 : 0.0);
      p[k] = p[k] * (1.0 - step_lr * wd) - step_lr * sign;
      mi[k] = settings.beta2 * mi[k] + (1 - settings.beta2) * g[k];
    }
  }
};

}  // namespace

TEST_CASE("lion_step matches two hand-computed steps") {
  std::vector<float> p = kStart, m(4, 0.0f);
  const ob::LionSettings settings{0.9, 0.99, 0.1};
  for (int t = 1; t <= 2; ++t) {
    ob::lion_step(p.data(), kGrads[t - 1].data(), m.data(), 4, 0.1, 0.1, settings);
    for (size_t k = 0; k < 4; ++k) {
      CAPTURE(t);
      CAPTURE(k);
      CHECK(p[k] == doctest::Approx(kAfter[t - 1][k]).epsilon(1e-6));
    }
  }
  const std::vector<double> m_after = {0.00245, -0.0049, 0.0298, 0.04};
  for (size_t k = 0; k < 4; ++k) CHECK(m[k] == doctest::Approx(m_after[k]).epsilon(1e-5));
}

TEST_CASE("lion conforms: known answers, skipped grads, resume, sharding") {
  patchbay::runtime::ComponentConfig config(ob::kLion);
  config.set_float("weight_decay", 0.1);
  SUBCASE("the hand-computed case through the C ABI") {
    pt::OptimizerCase c;
    c.params = {{"w", {2, 2}, kStart}};
    c.lrs = {0.1, 0.1};
    c.grads = {{kGrads[0]}, {kGrads[1]}};
    c.expected = {{kAfter[0]}, {kAfter[1]}};
    const auto report = pt::check_optimizer_conformance(ob::kLion, &config.view(), optimizer_tests::engine_host(), c);
    CHECK_MESSAGE(report.ok(), report.message());
  }
  SUBCASE("several parameters, groups, lr scales and missing grads against a double reference") {
    config.set_float("beta1", 0.8);
    pt::OptimizerCase c;
    c.params = {{"blocks.0.fc.weight", {2, 3}, {0.3f, -0.7f, 1.1f, 0.0f, 2.5f, -1.2f}},
                {"blocks.0.fc.bias", {3}, {0.1f, -0.2f, 0.3f}, 0.0},
                {"norm_f.gain", {3}, {1.0f, 1.0f, 1.0f}, 0.0, 0.5}};
    c.lrs = {0.01, 0.02, 0.03, 0.02};
    const std::vector<float> g6a = {0.1f, -0.2f, 0.3f, -0.4f, 0.5f, -0.6f}, g6b = {1.5f, 0.0f, -2.5f, 0.25f, 3.0f, -0.5f};
    const std::vector<float> g3a = {0.05f, -0.5f, 1.0f}, g3b = {-2.0f, 0.125f, 0.75f};
    c.grads = {{g6a, g3a, g3b}, {g6b, {}, g3a}, {g6a, g3b, {}}, {{}, g3a, g3b}};
    LionReference reference;
    reference.settings = {0.8, 0.99, 0.1};
    pt::fill_expected(c, std::ref(reference));
    const auto report = pt::check_optimizer_conformance(ob::kLion, &config.view(), optimizer_tests::engine_host(), c);
    CHECK_MESSAGE(report.ok(), report.message());
    // Sharding and the scaled step were checked; the one note: no bf16 copies (the host rounds).
    REQUIRE(report.notes.size() == 1);
    CHECK(report.notes[0].find("set_bf16_copy is NULL") != std::string::npos);
  }
}

TEST_CASE("lion refuses beta2 = 1 and a negative weight decay, naming the key") {
  CHECK_THROWS_WITH_AS(ob::Lion(ob::LionSettings{0.9, 1.0, 0.0}), doctest::Contains("beta2"), patchbay::PluginError);
  CHECK_THROWS_WITH_AS(ob::Lion(ob::LionSettings{0.9, 0.99, -1.0}), doctest::Contains("weight_decay"),
                       patchbay::PluginError);
}
