// Validation: every error kind with its message content (file, line, key path, closest
// names, valid keys, expected/found, fix), all errors reported at once, component
// sections validated against the component chosen by `kind`, defaults filled in.
#include <doctest/doctest.h>

#include <algorithm>
#include <string>

#include "config/config_loader.hpp"
#include "config/closest_names.hpp"
#include "config/config_validator.hpp"
#include "config/host_schema.hpp"
#include "fake_components.hpp"

using namespace patchbay::config;
using patchbay::config::testing::fake_tokenizer_lookup;
using patchbay::config::testing::fixture;

namespace {

const ConfigIssue& issue_for(const std::vector<ConfigIssue>& issues, const std::string& key_path) {
  const auto it = std::find_if(issues.begin(), issues.end(),
                               [&](const ConfigIssue& issue) { return issue.key_path == key_path; });
  REQUIRE_MESSAGE(it != issues.end(), "no issue for " << key_path << " in:\n" << format_issues(issues));
  return *it;
}

bool contains(const std::string& text, const std::string& part) { return text.find(part) != std::string::npos; }

std::vector<ConfigIssue> validate_text(const std::string& text) {
  const ResolvedConfig config = load_config_text(text, "inline.toml");
  return validate_config(config, make_host_schema(), fake_tokenizer_lookup());
}

}  // namespace

TEST_CASE("a valid config has no issues") {
  const ResolvedConfig config = load_config(fixture("valid.toml"));
  CHECK(validate_config(config, make_host_schema(), fake_tokenizer_lookup()).empty());
  CHECK_NOTHROW(validate_config_or_throw(config, make_host_schema(), fake_tokenizer_lookup()));
}

TEST_CASE("every error of a file is reported, each with file, line, key, expected, found and fix") {
  const ResolvedConfig config = load_config(fixture("many_errors.toml"));
  const std::vector<ConfigIssue> issues = validate_config(config, make_host_schema(), fake_tokenizer_lookup());
  CHECK(issues.size() == 6);
  for (const ConfigIssue& issue : issues) {
    CHECK(contains(issue.where.file, "many_errors.toml"));
    CHECK(issue.where.line > 0);
    CHECK_FALSE(issue.expected.empty());
    CHECK_FALSE(issue.found.empty());
    CHECK_FALSE(issue.fix.empty());
  }

  const ConfigIssue& unknown_run_key = issue_for(issues, "run.nmae");
  CHECK(unknown_run_key.problem == "unknown key");
  CHECK(unknown_run_key.where.line == 3);
  CHECK(contains(unknown_run_key.fix, "did you mean 'name'?"));
  CHECK(contains(unknown_run_key.expected, "name, output_dir, seed, plugin_paths"));

  const ConfigIssue& wrong_type = issue_for(issues, "run.seed");
  CHECK(wrong_type.problem == "wrong type");
  CHECK(wrong_type.where.line == 4);
  CHECK(contains(wrong_type.expected, "an integer in [0, 9007199254740992]"));
  CHECK(wrong_type.found == "string \"seven\"");
  CHECK(contains(wrong_type.fix, "remove the quotes"));

  const ConfigIssue& out_of_range = issue_for(issues, "data.validation_fraction");
  CHECK(out_of_range.problem == "value out of range");
  CHECK(out_of_range.where.line == 7);
  CHECK(contains(out_of_range.expected, "a number in [0, 0.5]"));
  CHECK(out_of_range.found == "float 2.5");

  const ConfigIssue& unknown_component_key = issue_for(issues, "tokenizer.vocab_sise");
  CHECK(unknown_component_key.where.line == 11);
  CHECK(contains(unknown_component_key.fix, "did you mean 'vocab_size'?"));
  CHECK(contains(unknown_component_key.expected, "[tokenizer] (tokenizer 'bpe')"));
  CHECK(contains(unknown_component_key.expected, "kind, file, vocab_size, special_tokens, mode, dropout, lowercase"));

  const ConfigIssue& missing = issue_for(issues, "tokenizer.vocab_size");
  CHECK(missing.problem == "missing required key");
  CHECK(missing.where.line == 9);  // the [tokenizer] header
  CHECK(contains(missing.fix, "add vocab_size = <integer> under [tokenizer]"));

  const ConfigIssue& unknown_section = issue_for(issues, "tokeniser");
  CHECK(unknown_section.problem == "unknown section");
  CHECK(unknown_section.where.line == 13);
  CHECK(contains(unknown_section.fix, "did you mean 'tokenizer'?"));
  CHECK(contains(unknown_section.expected, "run, data, tokenizer"));

  // The thrown error carries all of them, formatted with file:line.
  try {
    validate_config_or_throw(config, make_host_schema(), fake_tokenizer_lookup());
    FAIL("expected a ConfigError");
  } catch (const ConfigError& e) {
    CHECK(e.issues().size() == 6);
    const std::string message = e.what();
    CHECK(contains(message, "6 errors in the config"));
    CHECK(contains(message, "many_errors.toml:11: tokenizer.vocab_sise: unknown key"));
    CHECK(contains(message, "expected: "));
    CHECK(contains(message, "found:    'vocab_sise'"));
  }
}

TEST_CASE("an unknown component name lists the available ones and the closest") {
  const std::vector<ConfigIssue> issues = validate_text("[tokenizer]\nkind = \"bpf\"\nvocab_size = 512\n");
  REQUIRE(issues.size() == 1);  // component keys are not reported when the component is unknown
  const ConfigIssue& issue = issues.front();
  CHECK(issue.key_path == "tokenizer.kind");
  CHECK(issue.where.to_string() == "inline.toml:2");
  CHECK(issue.problem == "unknown tokenizer component 'bpf'");
  CHECK(contains(issue.expected, "bpe, char"));
  CHECK(contains(issue.fix, "did you mean 'bpe'?"));
  CHECK(contains(issue.fix, "--plugin-path"));
}

TEST_CASE("missing kind, choices, booleans, floats and string arrays") {
  SUBCASE("missing required kind") {
    const ResolvedConfig config = load_config(fixture("missing_required.toml"));
    const std::vector<ConfigIssue> issues = validate_config(config, make_host_schema(), fake_tokenizer_lookup());
    REQUIRE(issues.size() == 1);
    CHECK(issues[0].key_path == "tokenizer.kind");
    CHECK(issues[0].problem == "missing required key");
    CHECK(issues[0].where.line == 2);
  }
  SUBCASE("value not among the choices") {
    const auto issues = validate_text("[tokenizer]\nkind = \"bpe\"\nvocab_size = 512\nmode = \"byte\"\n");
    REQUIRE(issues.size() == 1);
    CHECK(issues[0].problem == "value not among the choices");
    CHECK(issues[0].expected == "one of 'bytes' or 'chars' (what a symbol is)");
    CHECK(contains(issues[0].fix, "did you mean 'bytes'?"));
    CHECK(issues[0].where.line == 4);
  }
  SUBCASE("an integer is a valid float, a float is not a valid integer") {
    CHECK(validate_text("[data]\nvalidation_fraction = 0\n").empty());
    const auto issues = validate_text("[run]\nseed = 1.5\n");
    REQUIRE(issues.size() == 1);
    CHECK(issues[0].found == "float 1.5");
    CHECK(contains(issues[0].fix, "whole number"));
  }
  SUBCASE("integer out of range") {
    const auto issues = validate_text("[tokenizer]\nkind = \"bpe\"\nvocab_size = 10\n");
    REQUIRE(issues.size() == 1);
    CHECK(issues[0].problem == "value out of range");
    CHECK(contains(issues[0].expected, "[256, 1048576]"));
    CHECK(contains(issues[0].fix, "choose a value in [256, 1048576]"));
  }
  SUBCASE("boolean written as a string") {
    const auto issues = validate_text("[tokenizer]\nkind = \"bpe\"\nvocab_size = 512\nlowercase = \"yes\"\n");
    REQUIRE(issues.size() == 1);
    CHECK(contains(issues[0].fix, "true or false"));
  }
  SUBCASE("string array with a non-string item names the item") {
    const auto issues = validate_text("[run]\nplugin_paths = [\"a\", 3]\n");
    REQUIRE(issues.size() == 1);
    CHECK(issues[0].key_path == "run.plugin_paths[1]");
    CHECK(issues[0].found == "integer 3");
    CHECK(issues[0].where.line == 2);
  }
  SUBCASE("a section given as a value") {
    const auto issues = validate_text("data = \"kjv\"\n");
    REQUIRE(issues.size() == 1);
    CHECK(issues[0].key_path == "data");
    CHECK(issues[0].problem == "wrong type");
    CHECK(contains(issues[0].expected, "a table [data]"));
  }
  SUBCASE("a --set typo is located on the command line") {
    ResolvedConfig config = load_config(fixture("valid.toml"), std::vector<std::string>{"run.sed=4"});
    const auto issues = validate_config(config, make_host_schema(), fake_tokenizer_lookup());
    REQUIRE(issues.size() == 1);
    CHECK(issues[0].where.file == "<command line --set run.sed=4>");
    CHECK(contains(issues[0].fix, "did you mean 'seed'?"));
  }
}

TEST_CASE("without a component lookup only the section's own keys are checked") {
  const ResolvedConfig config = load_config_text("[tokenizer]\nkind = \"anything\"\nfoo = 1\n", "inline.toml");
  CHECK(validate_config(config, make_host_schema(), ComponentSchemaLookup{}).empty());
}

TEST_CASE("a component with a broken schema is reported, not trusted") {
  static constexpr pb_config_field kBroken[] = {
      patchbay::Field::integer("size", "\"big\"", "a default of the wrong type"),
  };
  const ComponentSchemaLookup lookup = [](pb_component_kind, std::string_view) {
    return ComponentLookupResult{ComponentSchema{"broken", "libbroken.so", kBroken}, {}};
  };
  const ResolvedConfig config = load_config_text("[tokenizer]\nkind = \"broken\"\n", "inline.toml");
  const std::vector<ConfigIssue> issues = validate_config(config, make_host_schema(), lookup);
  REQUIRE(issues.size() == 1);
  CHECK(contains(issues[0].problem, "declares a broken config schema"));
  CHECK(contains(issues[0].found, "size"));
  CHECK(contains(issues[0].found, "libbroken.so"));
}

TEST_CASE("apply_defaults fills host and component defaults with their source") {
  ResolvedConfig config = load_config(fixture("valid.toml"));
  apply_defaults(config, make_host_schema(), fake_tokenizer_lookup());
  CHECK(config.find("run.output_dir")->as_string()->get() == "runs");
  CHECK(config.find("data.validation_fraction")->as_floating_point()->get() == doctest::Approx(0.1));
  // Component options end up in the chosen kind's own table (canonical form).
  REQUIRE(config.find("tokenizer.bpe.mode") != nullptr);
  CHECK(config.find("tokenizer.bpe.mode")->as_string()->get() == "bytes");
  CHECK(config.find("tokenizer.bpe.special_tokens")->as_array()->size() == 2);  // user's value kept
  CHECK(config.find("tokenizer.mode") == nullptr);
  CHECK(config.locate("run.output_dir").file == kDefaultSource);
  CHECK(config.locate("run.name").line == 2);
  CHECK(validate_config(config, make_host_schema(), fake_tokenizer_lookup()).empty());

  ResolvedConfig empty = load_config_text("", "empty.toml");
  apply_defaults(empty, make_host_schema(), fake_tokenizer_lookup());
  CHECK(empty.find("run.seed") != nullptr);    // always-present section created
  CHECK(empty.find("tokenizer") == nullptr);   // component section needs a kind: not created
}

TEST_CASE("the schema registry refuses malformed declarations") {
  SchemaRegistry schema;
  HostSection bad_default;
  bad_default.path = "x";
  bad_default.fields = {patchbay::Field::real("rate", "fast", "not a literal")};
  CHECK_THROWS_AS(schema.add_section(bad_default), patchbay::Error);

  HostSection orphan;
  orphan.path = "model.attention";
  CHECK_THROWS_AS(schema.add_section(orphan), patchbay::Error);

  HostSection model;
  model.path = "model";
  schema.add_section(model);
  CHECK_THROWS_AS(schema.add_section(model), patchbay::Error);
  HostSection attention;
  attention.path = "model.attention";
  attention.component_kind = PB_KIND_ATTENTION;
  attention.fields = {patchbay::Field::string("kind", nullptr, "attention").required()};
  schema.add_section(attention);
  CHECK(schema.child_section_names("model") == std::vector<std::string>{"attention"});

  // Nested sections validate recursively.
  const ResolvedConfig config = load_config_text("[model.attention]\nkinf = \"dense\"\n", "nested.toml");
  const std::vector<ConfigIssue> issues = validate_config(config, schema, ComponentSchemaLookup{});
  REQUIRE(issues.size() == 1);
  CHECK(issues[0].key_path == "model.attention.kind");
  CHECK(issues[0].problem == "missing required key");
}

TEST_CASE("closest names by edit distance") {
  CHECK(edit_distance("vocab_sise", "vocab_size") == 1);
  CHECK(edit_distance("", "abc") == 3);
  CHECK(edit_distance("Seed", "seed") == 0);
  CHECK(closest_names("sed", {"seed", "name", "set"}) == std::vector<std::string>{"seed", "set"});
  CHECK(closest_names("zzzzzz", {"seed", "name"}).empty());
}

TEST_CASE("[[data.sources]]: every entry is checked against the schema, as an array of tables") {
  const std::vector<ConfigIssue> issues = validate_text(
      "[[data.sources]]\nprepared = \"a\"\nweigth = 2.0\n"
      "[[data.sources]]\nweight = \"heavy\"\n");
  CHECK(issues.size() == 3);
  const ConfigIssue& typo = issue_for(issues, "data.sources[0].weigth");
  CHECK(typo.problem == "unknown key");
  CHECK(contains(typo.fix, "did you mean 'weight'?"));
  CHECK(contains(typo.expected, "prepared, name, weight, epochs"));
  CHECK(typo.where.line > 0);
  CHECK(issue_for(issues, "data.sources[1].weight").problem == "wrong type");
  CHECK(issue_for(issues, "data.sources[1].prepared").problem == "missing required key");

  const std::vector<ConfigIssue> scalar = validate_text("[data]\nsources = 3\n");
  CHECK(issue_for(scalar, "data.sources").problem == "wrong type");
  CHECK(contains(issue_for(scalar, "data.sources").expected, "an array of tables [[data.sources]]"));
  CHECK(issue_for(validate_text("[data]\nsources = []\n"), "data.sources").problem == "empty array");
  CHECK(issue_for(validate_text("[data]\nsources = [1, {prepared = \"a\"}]\n"), "data.sources[0]").problem ==
        "wrong type");
  CHECK(validate_text("[data]\nsources = [{prepared = \"a\", epochs = 2}]\n").empty());
}

TEST_CASE("apply_defaults writes the defaults into every [[data.sources]] entry") {
  ResolvedConfig config = load_config_text(
      "[[data.sources]]\nprepared = \"a\"\n[[data.sources]]\nprepared = \"b\"\nweight = 2.5\n", "inline.toml");
  validate_config_or_throw(config, make_host_schema(), fake_tokenizer_lookup());
  apply_defaults(config, make_host_schema(), fake_tokenizer_lookup());
  const toml::array& sources = *config.find("data.sources")->as_array();
  REQUIRE(sources.size() == 2);
  CHECK(sources.get(0)->as_table()->get("weight")->value<double>() == 1.0);
  CHECK(sources.get(0)->as_table()->get("epochs")->value<double>() == 0.0);
  CHECK(sources.get(0)->as_table()->get("name")->value<std::string>() == "");
  CHECK(sources.get(1)->as_table()->get("weight")->value<double>() == 2.5);
  CHECK(config.locate("data.sources[1].epochs").file == kDefaultSource);
  CHECK(config.find("data.corpus") != nullptr);  // the rest of [data] as before
}
