// sgd: momentum, Nesterov and dampening with L2 decay against hand-computed three steps, the
// component through the SDK's optimizer conformance kit, and the Nesterov refusal.
#include "sgd.hpp"

#include <doctest/doctest.h>

#include <map>
#include <vector>

#include "optimizer_test_host.hpp"
#include "patchbay/testing/optimizer_conformance.hpp"
#include "runtime/component_config.hpp"

namespace ob = optimizers_basic;
namespace pt = patchbay::testing;

namespace {

// p0 = [1, 2], lr 0.1, grads g1 = [1, -2], g2 = [0.5, 0.5], g3 = [-1, 1].
const std::vector<std::vector<float>> kGrads = {{1.0f, -2.0f}, {0.5f, 0.5f}, {-1.0f, 1.0f}};

pt::OptimizerCase hand_case(const std::vector<std::vector<double>>& after) {
  pt::OptimizerCase c;
  c.params = {{"w", {2}, {1.0f, 2.0f}}};
  c.lrs = {0.1, 0.1, 0.1};
  for (const auto& g : kGrads) c.grads.push_back({g});
  for (const auto& a : after) c.expected.push_back({a});
  c.rtol = 1e-6;
  return c;
}

}  // namespace

TEST_CASE("sgd with momentum 0.9: three hand-computed steps") {
  // buf1 = g1 = [1, -2]                     p1 = [1 - 0.1, 2 + 0.2]        = [0.9, 2.2]
  // buf2 = 0.9 buf1 + g2 = [1.4, -1.3]      p2 = [0.9 - 0.14, 2.2 + 0.13]  = [0.76, 2.33]
  // buf3 = 0.9 buf2 + g3 = [0.26, -0.17]    p3 = [0.76 - 0.026, 2.33 + 0.017] = [0.734, 2.347]
  patchbay::runtime::ComponentConfig config(ob::kSgd);
  config.set_float("momentum", 0.9);
  const auto c = hand_case({{0.9, 2.2}, {0.76, 2.33}, {0.734, 2.347}});
  const auto report =
      pt::check_optimizer_conformance(ob::kSgd, &config.view(), optimizer_tests::engine_host(), c);
  CHECK_MESSAGE(report.ok(), report.message());
}

TEST_CASE("sgd with Nesterov momentum 0.9: three hand-computed steps") {
  // buf as above; the step uses d = g + 0.9 buf:
  // d1 = [1, -2] + 0.9 [1, -2] = [1.9, -3.8]         p1 = [0.81, 2.38]
  // d2 = [0.5, 0.5] + 0.9 [1.4, -1.3] = [1.76, -0.67] p2 = [0.634, 2.447]
  // d3 = [-1, 1] + 0.9 [0.26, -0.17] = [-0.766, 0.847] p3 = [0.7106, 2.3623]
  patchbay::runtime::ComponentConfig config(ob::kSgd);
  config.set_float("momentum", 0.9);
  config.set_bool("nesterov", true);
  const auto c = hand_case({{0.81, 2.38}, {0.634, 2.447}, {0.7106, 2.3623}});
  const auto report =
      pt::check_optimizer_conformance(ob::kSgd, &config.view(), optimizer_tests::engine_host(), c);
  CHECK_MESSAGE(report.ok(), report.message());
}

TEST_CASE("sgd with dampening 0.5 and weight decay 0.1: three hand-computed steps") {
  // d = g + 0.1 p.  d1 = [1.1, -1.8]; buf1 = d1 (first step: no dampening)   p1 = [0.89, 2.18]
  // d2 = [0.589, 0.718]; buf2 = 0.9 buf1 + 0.5 d2 = [1.2845, -1.261]       p2 = [0.76155, 2.3061]
  // d3 = [-0.923845, 1.23061]; buf3 = [0.6941275, -0.519595]             p3 =
  // [0.69213725, 2.3580595]
  patchbay::runtime::ComponentConfig config(ob::kSgd);
  config.set_float("momentum", 0.9);
  config.set_float("dampening", 0.5);
  config.set_float("weight_decay", 0.1);
  const auto c = hand_case({{0.89, 2.18}, {0.76155, 2.3061}, {0.69213725, 2.3580595}});
  const auto report =
      pt::check_optimizer_conformance(ob::kSgd, &config.view(), optimizer_tests::engine_host(), c);
  CHECK_MESSAGE(report.ok(), report.message());
}

TEST_CASE("plain sgd has no state and a per-parameter decay scale applies") {
  patchbay::runtime::ComponentConfig config(ob::kSgd);
  config.set_float("weight_decay", 0.5);
  pt::OptimizerCase c;
  // p -= lr * (g + 0.5 * scale * p): w (scale 1): 2 - 0.1 * (1 + 1) = 1.8; b (scale 0): 2 - 0.1
  // = 1.9
  c.params = {{"w", {1, 1}, {2.0f}}, {"b", {1}, {2.0f}, 0.0}};
  c.lrs = {0.1};
  c.grads = {{{1.0f}, {1.0f}}};
  c.expected = {{{1.8}, {1.9}}};
  const auto report =
      pt::check_optimizer_conformance(ob::kSgd, &config.view(), optimizer_tests::engine_host(), c);
  CHECK_MESSAGE(report.ok(), report.message());
  ob::Sgd plain{ob::SgdSettings{}};
  CHECK(plain.states().empty());
}

TEST_CASE("sgd refuses Nesterov without momentum or with dampening, saying what to set") {
  CHECK_THROWS_WITH_AS(ob::Sgd(ob::SgdSettings{0.0, 0.0, true, 0.0}),
                       doctest::Contains("momentum > 0"), patchbay::PluginError);
  CHECK_THROWS_WITH_AS(ob::Sgd(ob::SgdSettings{0.9, 0.1, true, 0.0}),
                       doctest::Contains("dampening = 0"), patchbay::PluginError);
  CHECK_NOTHROW(ob::Sgd(ob::SgdSettings{0.9, 0.0, true, 0.0}));
}
