// pb_config_view conversion (every schema key, user values, defaults, owned strings) and
// printing the resolved config back as TOML (re-parses to the same document).
#include <doctest/doctest.h>

#include <cstring>
#include <string>

#include "config/component_view.hpp"
#include "config/config_loader.hpp"
#include "config/config_printer.hpp"
#include "config/config_validator.hpp"
#include "config/host_schema.hpp"
#include "fake_components.hpp"

using namespace patchbay::config;
using patchbay::config::testing::fake_tokenizer_lookup;
using patchbay::config::testing::fixture;
using patchbay::config::testing::kFakeBpeFields;

TEST_CASE("a component table becomes a pb_config_view with every key in schema order") {
  const ResolvedConfig config = load_config(fixture("valid.toml"));
  std::optional<ComponentConfigView> holder;
  {
    // The table goes away before the view is read: the holder owns every string.
    toml::table section = *config.find("tokenizer")->as_table();
    holder.emplace(section, kFakeBpeFields, "tokenizer");
  }
  const pb_config_view* view = holder->view();
  CHECK(view->struct_size == sizeof(pb_config_view));
  REQUIRE(view->count == 5);
  CHECK(std::strcmp(view->values[0].key, "vocab_size") == 0);
  CHECK(view->values[0].type == PB_TYPE_INT);
  CHECK(view->values[0].int_value == 512);
  CHECK(view->values[0].struct_size == sizeof(pb_config_value));

  const pb_config_value* specials = holder->find("special_tokens");
  REQUIRE(specials != nullptr);
  REQUIRE(specials->string_count == 2);
  CHECK(std::strcmp(specials->string_items[1], "<pad>") == 0);

  const pb_config_value* mode = holder->find("mode");  // default "bytes"
  REQUIRE(mode != nullptr);
  CHECK(std::strcmp(mode->string_value, "bytes") == 0);
  CHECK(holder->find("dropout")->float_value == 0.0);
  CHECK(holder->find("lowercase")->bool_value == 0);
  CHECK(holder->find("kind") == nullptr);  // host key, not the component's

  // Moving the holder keeps the view valid.
  ComponentConfigView moved = std::move(*holder);
  holder.reset();
  CHECK(std::strcmp(moved.find("mode")->string_value, "bytes") == 0);
  CHECK(moved.view()->values[0].int_value == 512);
}

TEST_CASE("an integer is handed to a float key as a double; a missing required key throws") {
  const ResolvedConfig config =
      load_config_text("[tokenizer]\nkind = \"bpe\"\nvocab_size = 300\ndropout = 1\n", "inline.toml");
  const ComponentConfigView view(*config.find("tokenizer")->as_table(), kFakeBpeFields, "tokenizer");
  CHECK(view.find("dropout")->type == PB_TYPE_FLOAT);
  CHECK(view.find("dropout")->float_value == 1.0);

  const toml::table without_size{{"kind", "bpe"}};
  CHECK_THROWS_AS(ComponentConfigView(without_size, kFakeBpeFields, "tokenizer"), ConfigError);
}

TEST_CASE("config show output re-parses to the same document") {
  const std::vector<std::string> overrides = {"run.plugin_paths=[\"x y\", \"z\"]", "extra.\"odd key\".v=1",
                                              "extra.empty={}", "data.note=\"line1\\nline2 \\\"q\\\"\""};
  ResolvedConfig config = load_config(fixture("override.toml"), overrides);
  apply_defaults(config, make_host_schema(), fake_tokenizer_lookup());
  const std::string printed = to_toml(config);
  const toml::table reparsed = toml::parse(printed);
  CHECK_MESSAGE(reparsed == config.table(), printed);

  const std::string annotated = to_toml(config, PrintOptions{true});
  CHECK(toml::parse(annotated) == config.table());
  CHECK(annotated.find("name = \"override\"  # ") != std::string::npos);
  CHECK(annotated.find("override.toml:5") != std::string::npos);
  CHECK(annotated.find("seed = 1  # ") != std::string::npos);
  CHECK(annotated.find("base.toml:4") != std::string::npos);
  CHECK(annotated.find("# <command line --set run.plugin_paths=") != std::string::npos);
  CHECK(annotated.find("output_dir = \"runs\"  # <schema default>") != std::string::npos);
}

TEST_CASE("select_component finds the chosen component and builds its view") {
  const SchemaRegistry schema = make_host_schema();
  const ResolvedConfig config = load_config(fixture("valid.toml"), std::vector<std::string>{"tokenizer.mode=chars"});
  const SelectedComponent selected = select_component(config, schema, fake_tokenizer_lookup(), "tokenizer");
  CHECK(selected.name == "bpe");
  CHECK(selected.config.view()->count == 5);
  CHECK(std::strcmp(selected.config.find("mode")->string_value, "chars") == 0);

  const ResolvedConfig without = load_config_text("[run]\nseed = 1\n", "no_tokenizer.toml");
  try {
    select_component(without, schema, fake_tokenizer_lookup(), "tokenizer");
    FAIL("expected a ConfigError");
  } catch (const ConfigError& e) {
    CHECK(e.issues().front().problem == "no tokenizer chosen");
    CHECK(e.issues().front().fix.find("--set tokenizer.kind=<name>") != std::string::npos);
  }
  CHECK_THROWS_AS(select_component(config, schema, fake_tokenizer_lookup(), "run"), patchbay::Error);
}
