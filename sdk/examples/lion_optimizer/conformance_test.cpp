// Runs the SDK's optimizer conformance kit on the built lion_optimizer.so (loaded by the engine
// test host exactly as `patchbay` loads it): known answers from a plain double-precision
// reference of the Lion update, skipped gradients, resume, ordering and sharding.
#define DOCTEST_CONFIG_IMPLEMENT_WITH_MAIN
#include <doctest/doctest.h>

#include <map>
#include <patchbay/testing/engine_host.hpp>
#include <patchbay/testing/optimizer_conformance.hpp>
#include <patchbay/testing/sampler_conformance.hpp>  // SamplerConfig: any descriptor's schema

namespace pt = patchbay::testing;

TEST_CASE("lion conforms and matches its reference") {
  const pb_component_descriptor& c = pt::load_component(PLUGIN_FILE, PB_KIND_OPTIMIZER, "lion");
  const double beta1 = 0.9, beta2 = 0.99, wd = 0.1;
  pt::SamplerConfig config(c);
  config.set_float("weight_decay", wd);

  pt::OptimizerCase lion;
  lion.params = {{"w", {2, 2}, {0.5f, -1.0f, 2.0f, 0.0f}}, {"b", {2}, {0.1f, 0.2f}, 0.0, 0.5}};
  lion.lrs = {0.1, 0.1, 0.05, 0.05};
  lion.grads = {{{0.3f, -0.2f, 0.0f, 1.0f}, {0.5f, -0.5f}},
                {{-0.1f, 0.4f, 0.2f, -1.0f}, {}},
                {{0.2f, 0.2f, -0.3f, 0.1f}, {-0.2f, 0.1f}},
                {{0.0f, -0.1f, 0.1f, 0.3f}, {0.4f, 0.0f}}};
  std::map<size_t, std::vector<double>> momentum;  // the reference's own state
  pt::fill_expected(lion, [&](size_t, size_t i, std::vector<double>& p, const std::vector<float>& g,
                              double lr, const pt::OptimizerParamSpec& spec) {
    std::vector<double>& m = momentum[i];
    m.resize(p.size(), 0.0);
    for (size_t k = 0; k < p.size(); ++k) {
      const double interp = beta1 * m[k] + (1 - beta1) * g[k];
      const double sign = interp > 0 ? 1.0 : (interp < 0 ? -1.0 : 0.0);
      p[k] -= lr * spec.lr_scale * (sign + wd * spec.weight_decay_scale * p[k]);
      m[k] = beta2 * m[k] + (1 - beta2) * g[k];
    }
  });
  const pt::OptimizerConformanceReport report =
      pt::check_optimizer_conformance(c, config.view(), pt::engine_host(), lion);
  CHECK_MESSAGE(report.ok(), report.message());
}
