// The SDK tokenizer conformance kit run through the host: the registry scans
// PATCHBAY_PLUGIN_PATH (set by patchbay_add_test to the build's plugin folder), loads the
// real tokenizer_bpe.so / tokenizer_char.so and creates every object under test.
#include <doctest/doctest.h>

#include <memory>
#include <patchbay/testing/tokenizer_conformance.hpp>

#include "runtime/registry.hpp"
#include "tokenizer_test_corpus.hpp"

namespace pt = patchbay::testing;
namespace rt = patchbay::runtime;

namespace {

rt::Registry& shared_registry() {
  static rt::Registry* registry = [] {
    auto* r = new rt::Registry();  // never freed: objects may outlive static destruction order
    r->scan(rt::plugin_search_path({}));
    return r;
  }();
  return *registry;
}

// Creates objects of `name` through the registry with `configure` applied to the defaults.
pt::TokenizerFactory loader_factory(const std::string& name,
                                    std::function<void(rt::ComponentConfig&)> configure) {
  return [name, configure]() {
    rt::Registry& registry = shared_registry();
    const rt::ComponentEntry& entry = registry.find(PB_KIND_TOKENIZER, name);
    rt::ComponentConfig config(*entry.descriptor);
    configure(config);
    auto instance = std::make_shared<rt::ComponentInstance>(
        registry.create(PB_KIND_TOKENIZER, name, config.view()));
    return pt::TokenizerUnderTest(
        static_cast<const pb_tokenizer_vtable*>(instance->component()->vtable), instance->get(),
        registry.host(), [instance]() mutable { instance.reset(); });
  };
}

}  // namespace

TEST_CASE("the registry finds both tokenizer plugins") {
  rt::Registry& registry = shared_registry();
  for (const auto& refused : registry.refused()) MESSAGE("refused: " << refused.reason);
  const rt::ComponentEntry& bpe = registry.find(PB_KIND_TOKENIZER, "bpe");
  const rt::ComponentEntry& chr = registry.find(PB_KIND_TOKENIZER, "char");
  CHECK(bpe.version == "1.1.0");  // 1.1: published vocabularies (vocab_file, merges_file, tokenizer_json)
  CHECK(chr.version == "1.0.0");
  CHECK(registry.plugin_of(bpe).file.filename() == "tokenizer_bpe.so");
  CHECK(registry.plugin_of(chr).file.filename() == "tokenizer_char.so");
}

TEST_CASE("bpe plugin conforms (loaded through the registry)") {
  pt::TokenizerConformanceOptions options;
  options.training_text = patchbay_test::small_training_corpus();
  pt::check_tokenizer_conformance(loader_factory("bpe", [](rt::ComponentConfig& c) {
                                    c.set_int("vocab_size", 700);
                                    c.set_strings("special_tokens", {"<|endoftext|>", "<|pad|>"});
                                  }),
                                  options);
}

TEST_CASE("char plugin conforms (loaded through the registry)") {
  pt::TokenizerConformanceOptions options;
  options.training_text = patchbay_test::small_training_corpus();
  pt::check_tokenizer_conformance(loader_factory("char", [](rt::ComponentConfig&) {}), options);
}

TEST_CASE("out-of-range config is refused by the host before the plugin runs") {
  const rt::ComponentEntry& entry = shared_registry().find(PB_KIND_TOKENIZER, "bpe");
  rt::ComponentConfig config(*entry.descriptor);
  CHECK_THROWS_AS(config.set_int("vocab_size", 100), patchbay::Error);
  CHECK_THROWS_AS(config.set_int("no_such_key", 1), patchbay::Error);
}

TEST_CASE("a vocab_size below 256 + specials is refused with the plugin's message") {
  const rt::ComponentEntry& entry = shared_registry().find(PB_KIND_TOKENIZER, "bpe");
  rt::ComponentConfig config(*entry.descriptor);
  config.set_int("vocab_size", 257);
  config.set_strings("special_tokens", {"<a>", "<b>"});
  try {
    shared_registry().create(PB_KIND_TOKENIZER, "bpe", config.view());
    FAIL("create should have failed");
  } catch (const patchbay::Error& e) {
    CHECK(std::string(e.what()).find("below 256 bytes + 2 special tokens") != std::string::npos);
  }
}
