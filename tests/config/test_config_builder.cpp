// The SDK's testing ConfigBuilder (patchbay/testing/config_builder.hpp): schema defaults,
// key-value pairs and `key = value` lines, the host's checks (unknown key, type, range,
// choices, required), and agreement with the host's own view builder
// (config::ComponentConfigView) value for value, so a plugin tested with the builder gets
// what the host would hand it.
#include <doctest/doctest.h>

#include <stdexcept>
#include <string>

#include "config/component_view.hpp"
#include "config/config_loader.hpp"
#include "patchbay/component.hpp"
#include "patchbay/testing/config_builder.hpp"

namespace pt = patchbay::testing;

namespace {

constexpr pb_config_field kFields[] = {
    patchbay::Field::integer("window", nullptr, "positions").required().range(1, 4096),
    patchbay::Field::real("dropout", "0.1", "rate").range(0.0, 1.0),
    patchbay::Field::boolean("causal", "true", "mask the future"),
    patchbay::Field::string("mode", "\"fast\"", "how").choices("fast|exact"),
    patchbay::Field::strings("names", "[\"a\", 'b']", "labels"),
};

pb_component_descriptor descriptor() {
  pb_component_descriptor d{};
  d.struct_size = sizeof d;
  d.kind = PB_KIND_ATTENTION;
  d.name = "probe";
  d.config_fields = kFields;
  d.config_field_count = std::size(kFields);
  return d;
}

}  // namespace

TEST_CASE(
    "ConfigBuilder: defaults, key-value pairs and text lines give every schema key in order") {
  const pb_component_descriptor d = descriptor();
  pt::ConfigBuilder config(d, {{"window", 32}, {"names", {"x", "y", "z"}}});
  const patchbay::ConfigView view(config.view());
  CHECK(view.get_int("window") == 32);
  CHECK(view.get_float("dropout") == 0.1);
  CHECK(view.get_bool("causal"));
  CHECK(view.get_string("mode") == "fast");
  CHECK(view.get_strings("names") == std::vector<std::string>{"x", "y", "z"});
  CHECK(config.view()->count == 5);
  CHECK(std::string(config.view()->values[0].key) == "window");

  pt::ConfigBuilder text(d,
                         "window = 1_024  # a comment\n\ndropout = 0  # an int for a float key\n"
                         "mode = \"exact\"\nnames = []\ncausal = false\n");
  const patchbay::ConfigView text_view(text.view());
  CHECK(text_view.get_int("window") == 1024);
  CHECK(text_view.get_float("dropout") == 0.0);
  CHECK_FALSE(text_view.get_bool("causal"));
  CHECK(text_view.get_string("mode") == "exact");
  CHECK(text_view.get_strings("names").empty());

  pt::ConfigBuilder copy = config;  // a copy builds its own view
  copy.set("window", 8);
  CHECK(patchbay::ConfigView(copy.view()).get_int("window") == 8);
  CHECK(patchbay::ConfigView(config.view()).get_int("window") == 32);
}

TEST_CASE("ConfigBuilder refuses what the host refuses, naming the key") {
  const pb_component_descriptor d = descriptor();
  pt::ConfigBuilder config(d);
  CHECK(config.missing() == std::vector<std::string>{"window"});
  CHECK_THROWS_WITH_AS(config.view(), doctest::Contains("required key(s) not set: window"),
                       std::invalid_argument);
  CHECK_THROWS_WITH_AS(config.set("windw", 3),
                       doctest::Contains("no config key 'windw'; valid keys: window, dropout"),
                       std::invalid_argument);
  CHECK_THROWS_WITH_AS(
      config.set("window", 0),
      doctest::Contains(
          "'window' (set): value out of range: expected an integer in [1, 4096], found integer 0"),
      std::invalid_argument);
  CHECK_THROWS_WITH_AS(config.set("window", 2.5), doctest::Contains("wrong type"),
                       std::invalid_argument);
  CHECK_THROWS_WITH_AS(config.set("mode", "slow"), doctest::Contains("one of fast|exact"),
                       std::invalid_argument);
  CHECK_THROWS_WITH_AS(config.set("causal", "yes"), doctest::Contains("expected a boolean"),
                       std::invalid_argument);
  CHECK_THROWS_WITH_AS(config.parse("window 3"), doctest::Contains("line 1 'window 3'"),
                       std::invalid_argument);
  CHECK_THROWS_WITH_AS(config.parse("\ndropout = 1.5"),
                       doctest::Contains("'dropout' (line 2): value out of range"),
                       std::invalid_argument);
}

TEST_CASE("ConfigBuilder and the host's view builder hand a component the same values") {
  const pb_component_descriptor d = descriptor();
  const char* options = "window = 12\ndropout = 0.25\nmode = \"exact\"\nnames = [\"p\", \"q\"]\n";
  pt::ConfigBuilder sdk(d, options);
  const patchbay::config::ResolvedConfig parsed =
      patchbay::config::load_config_text(options, "options.toml");
  const patchbay::config::ComponentConfigView host(parsed.table(), kFields,
                                                   "model.attention.probe");
  const pb_config_view& a = *sdk.view();
  const pb_config_view& b = *host.view();
  REQUIRE(a.count == b.count);
  for (size_t i = 0; i < a.count; ++i) {
    const pb_config_value& x = a.values[i];
    const pb_config_value& y = b.values[i];
    CAPTURE(x.key);
    CHECK(std::string(x.key) == y.key);
    CHECK(x.type == y.type);
    CHECK(x.bool_value == y.bool_value);
    CHECK(x.int_value == y.int_value);
    CHECK(x.float_value == y.float_value);
    if (x.type == PB_TYPE_STRING) CHECK(std::string(x.string_value) == y.string_value);
    REQUIRE(x.string_count == y.string_count);
    for (size_t k = 0; k < x.string_count; ++k)
      CHECK(std::string(x.string_items[k]) == y.string_items[k]);
  }
}
