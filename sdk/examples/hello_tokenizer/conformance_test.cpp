// Runs the SDK's tokenizer conformance kit on the built hello_tokenizer.so, loaded by the
// engine test host exactly as `patchbay` loads it, with the default eos token and another one.
#define DOCTEST_CONFIG_IMPLEMENT_WITH_MAIN
#include <doctest/doctest.h>

#include <patchbay/testing/engine_host.hpp>
#include <patchbay/testing/tokenizer_conformance.hpp>

namespace pt = patchbay::testing;

TEST_CASE("identity-byte conforms") {
  const pb_component_descriptor& c = pt::load_component(PLUGIN_FILE, PB_KIND_TOKENIZER, "identity-byte");
  pt::TokenizerConformanceOptions options;
  for (int i = 0; i < 50; ++i) options.training_text += "In the beginning was the word. Grüße, 世界! ";
  for (const char* eos : {"<|eos|>", "</s>"}) {
    CAPTURE(eos);
    pt::TokenizerConfig config(c);
    config.set_string("eos_token", eos);
    pt::check_tokenizer_conformance(pt::factory_for(c, config), options);
  }
}
