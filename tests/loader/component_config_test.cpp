// ComponentConfig: schema defaults parsed from TOML literals, checked setters, and the
// pb_config_view a plugin reads through patchbay::ConfigView (built by the config library's
// one schema-to-view path, so the messages are the config validator's words).
#include <doctest/doctest.h>

#include "loader_test_support.hpp"
#include "patchbay/component.hpp"

namespace rt = patchbay::runtime;
using loader_test::contains;

namespace {

constexpr pb_config_field kFields[] = {
    patchbay::Field::integer("vocab_size", "512", "size").range(256, 4096),
    patchbay::Field::real("dropout", "0.1", "rate").range(0, 1),
    patchbay::Field::boolean("lowercase", "false", "fold case"),
    patchbay::Field::string("mode", "\"bytes\"", "unit").choices("bytes|chars"),
    patchbay::Field::strings("specials", "[\"<|eos|>\", \"<pad>\"]", "special tokens"),
    patchbay::Field::string("vocab_file", nullptr, "file").required(),
};

pb_component_descriptor descriptor() {
  pb_component_descriptor d{};
  d.struct_size = sizeof d;
  d.kind = PB_KIND_TOKENIZER;
  d.name = "demo";
  d.config_fields = kFields;
  d.config_field_count = std::size(kFields);
  return d;
}

}  // namespace

TEST_CASE("defaults and set values reach ConfigView with their types") {
  const pb_component_descriptor d = descriptor();
  rt::ComponentConfig config(d);
  CHECK_THROWS_WITH_AS(config.view(),
                       "tokenizer 'demo': required config key(s) not set: vocab_file",
                       patchbay::Error);
  config.set_string("vocab_file", "v.txt");
  config.set_int("dropout", 0);  // an int is accepted for a float key
  const patchbay::ConfigView view(&config.view());
  CHECK(view.get_int("vocab_size") == 512);
  CHECK(view.get_float("dropout") == 0.0);
  CHECK(view.get_bool("lowercase") == false);
  CHECK(view.get_string("mode") == "bytes");
  CHECK(view.get_strings("specials") == std::vector<std::string>{"<|eos|>", "<pad>"});
  CHECK(view.get_string("vocab_file") == "v.txt");
  CHECK_THROWS_WITH_AS(view.get_int("vocab"),
                       doctest::Contains("config key 'vocab' is absent (keys present: "
                                         "vocab_size, dropout"),
                       patchbay::PluginError);
  CHECK_THROWS_WITH_AS(view.get_int("mode"),
                       doctest::Contains("'mode' holds a string but was read as int"),
                       patchbay::PluginError);
}

TEST_CASE("setters refuse unknown keys, wrong types, values out of range or choices") {
  const pb_component_descriptor d = descriptor();
  rt::ComponentConfig config(d);
  CHECK_THROWS_WITH_AS(config.set_int("vocab", 1),
                       doctest::Contains("tokenizer 'demo' has no config key 'vocab'; valid "
                                         "keys: vocab_size, dropout, lowercase, mode, specials, "
                                         "vocab_file"),
                       patchbay::Error);
  CHECK_THROWS_WITH_AS(config.set_string("vocab_size", "big"),
                       "tokenizer 'demo': key 'vocab_size' expects int, got string",
                       patchbay::Error);
  CHECK_THROWS_WITH_AS(config.set_int("vocab_size", 100),
                       "tokenizer 'demo': key 'vocab_size' = 100: value out of range; expected an "
                       "integer in [256, 4096]",
                       patchbay::Error);
  CHECK_THROWS_WITH_AS(config.set_float("dropout", 1.5), doctest::Contains("value out of range"),
                       patchbay::Error);
  CHECK_THROWS_WITH_AS(config.set_string("mode", "words"),
                       "tokenizer 'demo': key 'mode' = \"words\": value not among the choices; "
                       "expected one of 'bytes' or 'chars'",
                       patchbay::Error);
  config.set_int("vocab_size", 4096);  // bounds are inclusive
}

TEST_CASE("malformed default literals are reported as a schema bug") {
  constexpr pb_config_field kBad[] = {patchbay::Field::strings("x", "[\"a\" \"b\"]", "doc")};
  pb_component_descriptor d = descriptor();
  d.config_fields = kBad;
  d.config_field_count = 1;
  try {
    rt::ComponentConfig config(d);
    FAIL("should throw");
  } catch (const patchbay::Error& e) {
    CHECK(contains(e.what(), "tokenizer 'demo': broken config schema: config field 'x': default_value "
                             "'[\"a\" \"b\"]' is not one TOML value literal"));
  }
}
