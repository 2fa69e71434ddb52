// Runs the SDK's sampler conformance kit on the built epsilon_sampler.so (loaded by the engine
// test host exactly as `patchbay` loads it) for a few epsilons, and one known answer.
#define DOCTEST_CONFIG_IMPLEMENT_WITH_MAIN
#include <doctest/doctest.h>

#include <cmath>
#include <patchbay/testing/engine_host.hpp>
#include <patchbay/testing/sampler_conformance.hpp>

namespace pt = patchbay::testing;

TEST_CASE("epsilon conforms") {
  const pb_component_descriptor& c = pt::load_component(PLUGIN_FILE, PB_KIND_SAMPLER, "epsilon");
  for (const double epsilon : {0.0, 0.01, 0.2}) {
    CAPTURE(epsilon);
    pt::SamplerConfig config(c);
    config.set_float("epsilon", epsilon);
    const auto failures = pt::check_sampler_conformance(c, config.view(), pt::engine_host());
    CHECK_MESSAGE(failures.empty(), pt::join_failures(failures));
  }
}

TEST_CASE("epsilon drops exactly the tokens below epsilon") {
  // softmax([0, ln 2, ln 7]) = [0.1, 0.2, 0.7]: epsilon 0.15 drops only token 0.
  const pb_component_descriptor& c = pt::load_component(PLUGIN_FILE, PB_KIND_SAMPLER, "epsilon");
  pt::SamplerConfig config(c);
  config.set_float("epsilon", 0.15);
  void* object = pt::create_object(c, config.view());
  const auto* vtable = static_cast<const pb_sampler_vtable*>(c.vtable);
  float logits[3] = {0.0f, std::log(2.0f), std::log(7.0f)};
  pb_status* st = vtable->apply(object, logits, 3, nullptr, 0, 0);
  CHECK(st == nullptr);
  CHECK(logits[0] == -INFINITY);
  CHECK(logits[1] == doctest::Approx(std::log(2.0f)));
  CHECK(logits[2] == doctest::Approx(std::log(7.0f)));
  c.destroy(object);
}
