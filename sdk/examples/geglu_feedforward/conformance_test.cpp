// Runs the SDK's feed-forward conformance kit on the built geglu_feedforward.so (loaded by the
// engine test host exactly as `patchbay` loads it), with and without biases.
#define DOCTEST_CONFIG_IMPLEMENT_WITH_MAIN
#include <doctest/doctest.h>

#include <patchbay/testing/engine_host.hpp>
#include <patchbay/testing/feedforward_conformance.hpp>
#include <patchbay/testing/sampler_conformance.hpp>  // SamplerConfig: any descriptor's schema

namespace pt = patchbay::testing;

TEST_CASE("geglu conforms, with and without biases") {
  const pb_component_descriptor& c = pt::load_component(PLUGIN_FILE, PB_KIND_FEEDFORWARD, "geglu");
  // The product of two projections makes y larger than a plain MLP's at the kit's default
  // init std 0.5, and the f32 forward's rounding then shows in the finite differences
  // (eps 1e-3); 0.25 keeps y O(1) as in a real model.
  pt::FeedForwardConformanceOptions options;
  options.context.init_std = 0.25;
  options.context.residual_init_std = 0.25;
  for (const bool bias : {false, true}) {
    CAPTURE(bias);
    pt::SamplerConfig config(c);
    config.set_bool("bias", bias);
    const pt::FeedForwardConformanceReport report =
        pt::check_feedforward_conformance(c, config.view(), pt::engine_host(), options);
    CHECK_MESSAGE(report.ok(), report.message());
  }
}
