// Loading: include composition (order, deep merge, arrays replaced, nesting, relative
// paths), include errors (cycle, missing, wrong type), syntax errors, --set parsing and
// source tracking.
#include <doctest/doctest.h>

#include <string>
#include <vector>

#include "config/config_loader.hpp"
#include "fake_components.hpp"

using namespace patchbay::config;
using patchbay::config::testing::fixture;

namespace {

std::string string_at(const ResolvedConfig& config, std::string_view path) {
  const toml::node* node = config.find(path);
  REQUIRE_MESSAGE(node != nullptr, path);
  REQUIRE(node->is_string());
  return node->as_string()->get();
}

int64_t int_at(const ResolvedConfig& config, std::string_view path) {
  const toml::node* node = config.find(path);
  REQUIRE_MESSAGE(node != nullptr, path);
  REQUIRE(node->is_integer());
  return node->as_integer()->get();
}

// The single issue of the ConfigError thrown by `load`.
template <class Load>
ConfigIssue single_issue(Load&& load) {
  try {
    load();
  } catch (const ConfigError& e) {
    REQUIRE(e.issues().size() == 1);
    return e.issues().front();
  }
  FAIL("expected a ConfigError");
  return {};
}

bool ends_with(const std::string& text, const std::string& suffix) {
  return text.size() >= suffix.size() && text.compare(text.size() - suffix.size(), suffix.size(), suffix) == 0;
}

}  // namespace

TEST_CASE("an include is merged under the including file, which wins") {
  const ResolvedConfig config = load_config(fixture("override.toml"));
  CHECK(string_at(config, "run.name") == "override");
  CHECK(int_at(config, "run.seed") == 1);  // only in base: kept by the deep merge
  CHECK(int_at(config, "tokenizer.vocab_size") == 1024);
  CHECK(string_at(config, "tokenizer.kind") == "bpe");
  CHECK(config.find("include") == nullptr);
  // Arrays are replaced whole, not concatenated.
  const toml::array* paths = config.find("run.plugin_paths")->as_array();
  REQUIRE(paths != nullptr);
  REQUIRE(paths->size() == 1);
  CHECK(paths->get(0)->as_string()->get() == "c");
}

TEST_CASE("later includes win over earlier ones and the file wins over all") {
  const ResolvedConfig config = load_config(fixture("two_includes.toml"));
  CHECK(string_at(config, "run.name") == "second");
  CHECK(int_at(config, "data.seed") == 7);
  CHECK(config.find("data.validation_fraction")->as_floating_point()->get() == doctest::Approx(0.2));
  CHECK(string_at(config, "data.corpus") == "kjv");
}

TEST_CASE("includes nest and resolve relative to the including file") {
  const ResolvedConfig config = load_config(fixture("nested/top.toml"));
  CHECK(string_at(config, "run.name") == "top");
  CHECK(string_at(config, "data.corpus") == "middle.txt");
  CHECK(string_at(config, "data.output_dir") == "leaf-out");
}

TEST_CASE("every key remembers the file and line it came from") {
  const ResolvedConfig config = load_config(fixture("override.toml"));
  CHECK(ends_with(config.locate("run.name").file, "override.toml"));
  CHECK(config.locate("run.name").line == 5);
  CHECK(ends_with(config.locate("run.seed").file, "base.toml"));
  CHECK(config.locate("run.seed").line == 4);
  CHECK(ends_with(config.locate("run.plugin_paths").file, "override.toml"));
  CHECK(config.locate("run.plugin_paths").line == 6);
  CHECK(ends_with(config.locate("data.corpus").file, "base.toml"));
  CHECK(config.locate("data.corpus").line == 8);
  // A missing key is located at its nearest ancestor table.
  CHECK(ends_with(config.locate("data.no_such_key").file, "base.toml"));
  CHECK(config.locate("data.no_such_key").line == 7);
  // Old array items are forgotten when the array is replaced.
  CHECK(config.sources().count("run.plugin_paths[1]") == 0);
  CHECK(config.sources().count("run.plugin_paths[0]") == 1);
}

TEST_CASE("an include cycle is an error naming the chain") {
  const ConfigIssue issue = single_issue([] { load_config(fixture("cycle_a.toml")); });
  CHECK(issue.problem == "include cycle");
  CHECK(issue.key_path == "include");
  CHECK(ends_with(issue.where.file, "cycle_b.toml"));
  CHECK(issue.where.line == 1);
  CHECK(issue.found.find("cycle_a.toml -> ") != std::string::npos);
  CHECK(issue.found.find("cycle_b.toml -> ") != std::string::npos);
  CHECK(ends_with(issue.found, "cycle_a.toml"));
  CHECK_FALSE(issue.fix.empty());
}

TEST_CASE("a missing include names the including file and line") {
  const ConfigIssue issue = single_issue([] { load_config(fixture("missing_include.toml")); });
  CHECK(ends_with(issue.where.file, "missing_include.toml"));
  CHECK(issue.where.line == 2);
  CHECK(issue.problem == "included config file not found");
  CHECK(issue.found.find("does_not_exist.toml") != std::string::npos);
}

TEST_CASE("a missing root file, a non-array include and a syntax error are reported") {
  const ConfigIssue missing = single_issue([] { load_config(fixture("nope.toml")); });
  CHECK(missing.problem == "config file not found");
  CHECK(missing.found.find("nope.toml") != std::string::npos);

  const ConfigIssue not_array = single_issue([] { load_config(fixture("include_not_array.toml")); });
  CHECK(not_array.key_path == "include");
  CHECK(not_array.problem == "wrong type");
  CHECK(not_array.found == "string \"base.toml\"");
  CHECK(not_array.expected.find("array of file paths") != std::string::npos);

  const ConfigIssue syntax = single_issue([] { load_config(fixture("syntax_error.toml")); });
  CHECK(ends_with(syntax.where.file, "syntax_error.toml"));
  CHECK(syntax.where.line == 3);
  CHECK(syntax.problem.find("TOML syntax error") != std::string::npos);
}

TEST_CASE("--set parses TOML values and falls back to bare strings") {
  ResolvedConfig config = load_config_text("[run]\nname = \"x\"\n", "inline.toml");
  apply_set_override(config, "run.seed=42");
  apply_set_override(config, "data.validation_fraction=0.25");
  apply_set_override(config, "tokenizer.lowercase=true");
  apply_set_override(config, "tokenizer.kind=bpe");
  apply_set_override(config, "tokenizer.mode=\"chars\"");
  apply_set_override(config, "run.plugin_paths=[\"p1\", \"p2\"]");
  apply_set_override(config, "data.corpus = /tmp/my corpus.txt");
  apply_set_override(config, "a.b.c.d=1");
  apply_set_override(config, "quoted.\"x.y\"=2");

  CHECK(int_at(config, "run.seed") == 42);
  CHECK(config.find("data.validation_fraction")->as_floating_point()->get() == doctest::Approx(0.25));
  CHECK(config.find("tokenizer.lowercase")->as_boolean()->get());
  CHECK(string_at(config, "tokenizer.kind") == "bpe");
  CHECK(string_at(config, "tokenizer.mode") == "chars");
  REQUIRE(config.find("run.plugin_paths")->as_array()->size() == 2);
  CHECK(string_at(config, "data.corpus") == "/tmp/my corpus.txt");
  CHECK(string_at(config, "run.name") == "x");  // untouched neighbour
  CHECK(int_at(config, "a.b.c.d") == 1);
  CHECK(config.find("a.b")->is_table());
  CHECK(config.table()["quoted"]["x.y"].value<int64_t>() == 2);
  CHECK(config.locate("run.seed").file == "<command line --set run.seed=42>");
  CHECK(config.locate("run.seed").line == 0);
  CHECK(config.locate("a.b.c").file == "<command line --set a.b.c.d=1>");
  CHECK(config.locate("run.name").file == "inline.toml");
}

TEST_CASE("--set replaces a whole table or array and can be given to load_config") {
  const std::vector<std::string> overrides = {"tokenizer={kind = \"char\"}", "run.name=cli"};
  const ResolvedConfig config = load_config(fixture("override.toml"), overrides);
  CHECK(string_at(config, "tokenizer.kind") == "char");
  CHECK(config.find("tokenizer.vocab_size") == nullptr);
  CHECK(string_at(config, "run.name") == "cli");
  CHECK(config.sources().count("tokenizer.vocab_size") == 0);
}

TEST_CASE("a malformed --set is an error saying what to write") {
  ResolvedConfig config = load_config_text("[run]\nseed = 1\n", "inline.toml");
  for (const char* bad : {"run.seed", "=3", "run..seed=3", "run seed=3", "\"open=1"}) {
    const ConfigIssue issue = single_issue([&] { apply_set_override(config, bad); });
    CHECK(issue.problem == "malformed --set override");
    CHECK(issue.found.find(bad) != std::string::npos);
    CHECK(issue.expected.find("path=value") != std::string::npos);
  }
  const ConfigIssue through_value = single_issue([&] { apply_set_override(config, "run.seed.x=1"); });
  CHECK(through_value.key_path == "run.seed");
  CHECK(through_value.found.find("integer 1 set at inline.toml:2") != std::string::npos);
}

TEST_CASE("a fragment included through two paths is not a cycle") {
  const ResolvedConfig config = load_config(fixture("diamond.toml"));
  // two_includes.toml comes last: its chain (base, second, itself) wins over override.toml.
  CHECK(string_at(config, "run.name") == "second");
  CHECK(int_at(config, "data.seed") == 7);
  CHECK(int_at(config, "tokenizer.vocab_size") == 512);  // base re-applied after override
  CHECK(ends_with(config.locate("tokenizer.vocab_size").file, "base.toml"));
}
