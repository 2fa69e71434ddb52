// Runs the SDK's attention conformance kit on the built local_attention.so, loaded by the
// engine test host exactly as `patchbay` loads it, for two windows: 1 (each position sees only
// itself) and 4 (shorter than the kit's sequences, so the window really cuts).
#define DOCTEST_CONFIG_IMPLEMENT_WITH_MAIN
#include <doctest/doctest.h>

#include <patchbay/testing/attention_conformance.hpp>
#include <patchbay/testing/engine_host.hpp>
#include <patchbay/testing/sampler_conformance.hpp>  // SamplerConfig: any descriptor's schema

namespace pt = patchbay::testing;

namespace {

pt::AttentionFactory local_factory(int64_t window) {
  return [window] {
    const pb_component_descriptor& c = pt::load_component(PLUGIN_FILE, PB_KIND_ATTENTION, "local");
    pt::SamplerConfig config(c);
    config.set_int("window", window);
    void* object = pt::create_object(c, config.view());
    return pt::AttentionUnderTest(static_cast<const pb_attention_vtable*>(c.vtable), object,
                                  pt::engine_host(), [&c, object] { c.destroy(object); });
  };
}

}  // namespace

TEST_CASE("local attention conforms with window 4") {
  pt::check_attention_conformance(local_factory(4), pt::AttentionConformanceOptions{});
}

TEST_CASE("local attention conforms with window 1") {
  pt::check_attention_conformance(local_factory(1), pt::AttentionConformanceOptions{});
}
