// Test fixtures: a component schema lookup with two fake tokenizers ("bpe", "char"), so
// config tests run without loading plugins, and the path of the fixture files.
#pragma once

#include <string>

#include "config/schema_registry.hpp"
#include "patchbay/component.hpp"

namespace patchbay::config::testing {

inline const std::string kFixtures = PATCHBAY_CONFIG_FIXTURES;

inline constexpr pb_config_field kFakeBpeFields[] = {
    Field::integer("vocab_size", nullptr, "target vocabulary size").required().range(256, 1 << 20),
    Field::strings("special_tokens", "[\"<|endoftext|>\"]", "special tokens"),
    Field::string("mode", "\"bytes\"", "what a symbol is").choices("bytes|chars"),
    Field::real("dropout", "0.0", "merge dropout").range(0.0, 1.0),
    Field::boolean("lowercase", "false", "lowercase before encoding"),
};

inline constexpr pb_config_field kFakeCharFields[] = {
    Field::strings("special_tokens", "[]", "special tokens"),
};

inline ComponentSchemaLookup fake_tokenizer_lookup() {
  return [](pb_component_kind kind, std::string_view name) {
    ComponentLookupResult result;
    if (kind != PB_KIND_TOKENIZER) return result;
    if (name == "bpe") result.schema = ComponentSchema{"bpe", "fake", kFakeBpeFields};
    if (name == "char") result.schema = ComponentSchema{"char", "fake", kFakeCharFields};
    if (!result.schema) result.available = {"bpe", "char"};
    return result;
  };
}

inline std::string fixture(const std::string& name) { return kFixtures + "/" + name; }

}  // namespace patchbay::config::testing
