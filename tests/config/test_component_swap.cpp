// Swapping components by config (config/component_options.hpp), for every component section
// (tokenizer, optimizer, attention, feed-forward, parallelism) with fake schemas: a swap by
// `--set X.kind=...`, by an inline-table `--set X={...}` and by an including config; flat keys
// versus per-kind tables; patterns whose kinds each take their own options; unused tables
// validated, set aside and shown as ignored; the resolved config holding only what was used.
#include <doctest/doctest.h>

#include <algorithm>
#include <string>
#include <vector>

#include "config/component_options.hpp"
#include "config/component_view.hpp"
#include "config/config_loader.hpp"
#include "config/config_printer.hpp"
#include "config/config_validator.hpp"
#include "swap_components.hpp"

using namespace patchbay::config;
using patchbay::config::testing::fixture;
using patchbay::config::testing::swap_lookup;
using patchbay::config::testing::swap_schema;

namespace {

bool contains(const std::string& text, const std::string& part) {
  return text.find(part) != std::string::npos;
}

// Loads, validates (REQUIREs no issue) and resolves.
ResolvedConfig resolve(ResolvedConfig config) {
  const std::vector<ConfigIssue> issues = validate_config(config, swap_schema(), swap_lookup());
  REQUIRE_MESSAGE(issues.empty(), format_issues(issues));
  apply_defaults(config, swap_schema(), swap_lookup());
  return config;
}

ResolvedConfig resolve_file(const std::string& name,
                            const std::vector<std::string>& overrides = {}) {
  return resolve(load_config(fixture(name), overrides));
}

std::vector<std::string> ignored_paths(const ResolvedConfig& config) {
  std::vector<std::string> paths;
  for (const ResolvedConfig::IgnoredTable& t : config.ignored())
    paths.push_back(t.section_path + "." + t.name);
  return paths;
}

bool has(const std::vector<std::string>& list, const std::string& item) {
  return std::find(list.begin(), list.end(), item) != list.end();
}

// The options the section's chosen component receives, through select_component.
const pb_config_value* chosen_value(const ResolvedConfig& config, const std::string& section,
                                    const std::string& key) {
  static std::optional<SelectedComponent> holder;
  holder.emplace(select_component(config, swap_schema(), swap_lookup(), section));
  return holder->config.find(key);
}

}  // namespace

TEST_CASE("the chosen kind takes its options from its own table; the others are set aside") {
  const ResolvedConfig config = resolve_file("swap_base.toml");
  CHECK(config.find("tokenizer.bpe.vocab_size")->value<int64_t>() == 512);
  CHECK(config.find("optimizer.adamw.beta2")->value<double>() == 0.95);
  CHECK(config.find("optimizer.adamw.beta1")->value<double>() ==
        0.9);  // default filled in its table
  CHECK(config.find("model.attention.dense.dropout")->value<double>() == 0.1);
  CHECK(config.find("model.feedforward.mlp.activation")->value<std::string>() == "relu");
  CHECK(config.find("optimizer.sgd") == nullptr);
  CHECK(config.find("tokenizer.char") == nullptr);
  const std::vector<std::string> ignored = ignored_paths(config);
  CHECK(ignored.size() == 5);
  for (const char* path : {"tokenizer.char", "optimizer.sgd", "model.attention.local",
                           "model.feedforward.moe", "parallelism.data"}) {
    CHECK_MESSAGE(has(ignored, path), path);
  }
  CHECK(chosen_value(config, "optimizer", "beta2")->float_value == 0.95);
  CHECK(chosen_value(config, "tokenizer", "vocab_size")->int_value == 512);
}

TEST_CASE("--set X.kind swaps every component kind in one override each") {
  const ResolvedConfig config = resolve_file(
      "swap_base.toml", {"tokenizer.kind=char", "optimizer.kind=sgd", "model.attention.kind=local",
                         "model.feedforward.kind=moe", "parallelism.kind=data"});
  CHECK(config.find("tokenizer.char.special_tokens")->as_array()->size() == 1);
  CHECK(config.find("optimizer.sgd.momentum")->value<double>() == 0.9);
  CHECK(config.find("model.attention.local.window")->value<int64_t>() == 32);
  CHECK(config.find("model.feedforward.moe.experts")->value<int64_t>() == 4);
  CHECK(config.find("parallelism.data.bucket_mb")->value<int64_t>() == 50);
  for (const char* unused : {"tokenizer.bpe", "optimizer.adamw", "model.attention.dense",
                             "model.feedforward.mlp", "parallelism.single"}) {
    CHECK_MESSAGE(config.find(unused) == nullptr, unused);
  }
  CHECK(chosen_value(config, "optimizer", "momentum")->float_value == 0.9);
  CHECK(chosen_value(config, "parallelism", "bucket_mb")->int_value == 50);
}

TEST_CASE("a config that includes another swaps by naming another kind") {
  const ResolvedConfig config = resolve_file("swap_child.toml");
  CHECK(config.find("tokenizer.kind")->value<std::string>() == "char");
  CHECK(config.find("optimizer.sgd.momentum")->value<double>() == 0.9);
  CHECK(config.find("model.attention.local.window")->value<int64_t>() == 32);
  CHECK(config.find("model.feedforward.moe.experts")->value<int64_t>() == 4);
  CHECK(config.find("parallelism.data.bucket_mb")->value<int64_t>() == 50);
  CHECK(has(ignored_paths(config), "optimizer.adamw"));
  // The moved options keep where they were written.
  CHECK(contains(config.locate("optimizer.sgd.momentum").to_string(), "swap_base.toml:18"));
}

TEST_CASE("an inline-table --set replaces the whole component table, flat keys included") {
  const char* flat =
      "[optimizer]\nkind = \"adamw\"\nbeta1 = 0.8\nbeta2 = 0.9\n"
      "[parallelism]\nkind = \"data\"\nbucket_mb = 10\n"
      "[model.feedforward]\nkind = \"mlp\"\nactivation = \"relu\"\n";
  ResolvedConfig raw = load_config_text(flat, "flat.toml");
  apply_set_override(raw, "optimizer={kind=\"sgd\", momentum=0.5}");
  apply_set_override(raw, "parallelism={kind=\"single\"}");
  apply_set_override(raw, "model.feedforward={kind=\"moe\", moe={experts=2}}");
  const ResolvedConfig config = resolve(std::move(raw));
  CHECK(config.find("optimizer.sgd.momentum")->value<double>() == 0.5);
  CHECK(config.find("optimizer.beta1") == nullptr);
  CHECK(config.find("optimizer.adamw") == nullptr);
  CHECK(config.find("parallelism.kind")->value<std::string>() == "single");
  CHECK(config.find("parallelism.bucket_mb") == nullptr);
  CHECK(config.find("model.feedforward.moe.experts")->value<int64_t>() == 2);
  CHECK(contains(config.locate("optimizer.sgd.momentum").file, "--set optimizer={kind="));
}

TEST_CASE("flat keys (the original form) still work and win over the kind's own table") {
  const ResolvedConfig config =
      resolve_file("swap_base.toml", {"optimizer.beta2=0.5", "tokenizer.vocab_size=1024"});
  CHECK(config.find("optimizer.adamw.beta2")->value<double>() == 0.5);
  CHECK(config.find("optimizer.beta2") == nullptr);  // moved into the kind's table
  CHECK(contains(config.locate("optimizer.adamw.beta2").file, "--set optimizer.beta2=0.5"));
  CHECK(config.find("tokenizer.bpe.vocab_size")->value<int64_t>() == 1024);
}

TEST_CASE(
    "a swap with flat keys of the old kind still fails, and says where options of another kind "
    "go") {
  ResolvedConfig config =
      load_config_text("[optimizer]\nkind = \"adamw\"\nbeta1 = 0.9\n", "old.toml");
  apply_set_override(config, "optimizer.kind=sgd");
  const std::vector<ConfigIssue> issues = validate_config(config, swap_schema(), swap_lookup());
  REQUIRE(issues.size() == 1);
  CHECK(issues[0].key_path == "optimizer.beta1");
  CHECK(issues[0].where.to_string() == "old.toml:3");
  CHECK(contains(issues[0].fix, "[optimizer.<name>]"));
}

TEST_CASE(
    "each kind of a pattern takes its options from its own table, checked against its own schema") {
  const char* text =
      "[model.attention]\nkind = \"dense\"\npattern = [\"local\", \"dense\"]\n"
      "[model.attention.local]\nwindow = 32\n"
      "[model.attention.dense]\ndropout = 0.2\n"
      "[model.feedforward]\nkind = \"mlp\"\npattern = [\"moe\", \"mlp\"]\nactivation = \"swiglu\"\n"
      "[model.feedforward.moe]\nexperts = 16\n";
  const ResolvedConfig config = resolve(load_config_text(text, "pattern.toml"));
  CHECK(config.find("model.attention.local.window")->value<int64_t>() == 32);
  CHECK(config.find("model.attention.dense.dropout")->value<double>() == 0.2);
  CHECK(config.find("model.feedforward.moe.experts")->value<int64_t>() == 16);
  CHECK(config.find("model.feedforward.mlp.activation")->value<std::string>() ==
        "swiglu");  // flat -> kind
  CHECK(config.ignored().empty());

  const toml::table& attention = *config.find("model.attention")->as_table();
  const std::vector<std::string> host_keys{"kind", "pattern"};
  CHECK(component_options(attention, "local", host_keys).size() == 1);
  CHECK(component_options(attention, "dense", host_keys).get("window") == nullptr);
}

TEST_CASE("a misspelt key in one pattern kind's table is reported with file:line") {
  const ResolvedConfig config = load_config(fixture("swap_pattern.toml"));
  const std::vector<ConfigIssue> issues = validate_config(config, swap_schema(), swap_lookup());
  REQUIRE_MESSAGE(issues.size() == 2, format_issues(issues));
  const bool typo_first = issues[0].key_path == "model.attention.local.windw";
  const ConfigIssue& typo = issues[typo_first ? 0 : 1];
  const ConfigIssue& missing = issues[typo_first ? 1 : 0];
  CHECK(typo.key_path == "model.attention.local.windw");
  CHECK(contains(typo.where.to_string(), "swap_pattern.toml:7"));
  CHECK(typo.problem == "unknown key");
  CHECK(contains(typo.fix, "did you mean 'window'?"));
  CHECK(contains(typo.expected, "attention 'local'"));
  // local's required window is missing from its own table.
  CHECK(missing.key_path == "model.attention.local.window");
  CHECK(missing.problem == "missing required key");
}

TEST_CASE("a pattern entry that names no component is reported") {
  const ResolvedConfig config = load_config_text(
      "[model.attention]\nkind = \"dense\"\npattern = [\"dense\", \"locl\"]\n", "p.toml");
  const std::vector<ConfigIssue> issues = validate_config(config, swap_schema(), swap_lookup());
  REQUIRE(issues.size() == 1);
  CHECK(issues[0].key_path == "model.attention.pattern[1]");
  CHECK(contains(issues[0].fix, "did you mean 'local'?"));
}

TEST_CASE(
    "unused tables are still checked against their own kind's schema; unknown table names are "
    "errors") {
  const char* text =
      "[optimizer]\nkind = \"adamw\"\n"
      "[optimizer.sgd]\nmomentun = 0.9\n"
      "[optimizer.adamww]\nbeta1 = 0.9\n"
      "[optimizer.adamw]\nbeta1 = \"high\"\n";
  const ResolvedConfig config = load_config_text(text, "typos.toml");
  const std::vector<ConfigIssue> issues = validate_config(config, swap_schema(), swap_lookup());
  REQUIRE_MESSAGE(issues.size() == 3, format_issues(issues));
  CHECK(issues[0].key_path == "optimizer.sgd.momentun");
  CHECK(issues[0].where.line == 4);
  CHECK(contains(issues[0].expected, "not used"));
  CHECK(issues[1].key_path == "optimizer.adamww");
  CHECK(contains(issues[1].problem, "unknown optimizer component 'adamww'"));
  CHECK(contains(issues[1].fix, "did you mean 'adamw'?"));
  CHECK(issues[2].key_path == "optimizer.adamw.beta1");
  CHECK(issues[2].problem == "wrong type");
}

TEST_CASE("a required key of the chosen kind may sit flat or in its own table") {
  CHECK(validate_config(
            load_config_text("[tokenizer]\nkind = \"bpe\"\n[tokenizer.bpe]\nvocab_size = 300\n",
                             "a.toml"),
            swap_schema(), swap_lookup())
            .empty());
  const std::vector<ConfigIssue> missing = validate_config(
      load_config_text("[tokenizer]\nkind = \"bpe\"\n[tokenizer.char]\nspecial_tokens = []\n",
                       "b.toml"),
      swap_schema(), swap_lookup());
  REQUIRE(missing.size() == 1);
  CHECK(missing[0].key_path == "tokenizer.vocab_size");
}

TEST_CASE(
    "the resolved config holds only what was used; config show prints the rest marked ignored") {
  const ResolvedConfig config = resolve_file("swap_base.toml", {"optimizer.kind=sgd"});
  const std::string stored = to_toml(config);
  CHECK(contains(stored, "[optimizer.sgd]\nmomentum = 0.9\n"));
  CHECK_FALSE(contains(stored, "adamw"));
  CHECK_FALSE(contains(stored, "ignored"));
  CHECK_FALSE(contains(stored, "[model.attention.local]"));

  const std::string shown = to_toml(config, PrintOptions{true, true});
  CHECK(contains(shown, "[optimizer.adamw]  # ignored: not used: optimizer kind = \"sgd\"  # "));
  CHECK(contains(shown, "beta2 = 0.95  # "));
  CHECK(contains(shown, "swap_base.toml:14"));
  CHECK(contains(shown,
                 "[model.attention.local]  # ignored: not used: attention kind = \"dense\" and not "
                 "in pattern"));

  // Rerunning the stored config gives the same resolved config (canonical form is stable),
  // and a swap on the stored config is still one override.
  const ResolvedConfig again = resolve(load_config_text(stored, "stored.toml"));
  CHECK(to_toml(again) == stored);
  CHECK(again.ignored().empty());
  ResolvedConfig swapped_back = load_config_text(stored, "stored.toml");
  apply_set_override(swapped_back, "optimizer.kind=adamw");
  CHECK(resolve(std::move(swapped_back)).find("optimizer.adamw.beta1")->value<double>() == 0.9);
}

TEST_CASE("an encoder-decoder's cross-attention and per-stack feed-forward kinds count as used") {
  const toml::table root = toml::parse(
      "[model]\narchitecture = \"encoder_decoder\"\ncross_attention = \"linformer\"\n"
      "encoder_feedforward = [\"mlp\"]\ndecoder_feedforward = [\"moe\", \"mlp\"]\n"
      "[model.attention]\nkind = \"dense\"\n[model.attention.linformer]\nk = 8\n");
  CHECK(kinds_used_elsewhere(root, "model.attention") == std::vector<std::string>{"linformer"});
  CHECK(kinds_used_elsewhere(root, "model.feedforward") == std::vector<std::string>{"mlp", "moe"});
  CHECK(kinds_used_elsewhere(root, "optimizer").empty());
  const std::vector<std::string> host_keys{"kind", "pattern"};
  const std::vector<std::string> also = kinds_used_elsewhere(root, "model.attention");
  CHECK(used_component_names(*root["model"]["attention"].as_table(), host_keys, also) ==
        std::vector<std::string>{"dense", "linformer"});
  // A single-stack model names no kind elsewhere: its cross_attention key is not read.
  const toml::table single = toml::parse("[model]\ncross_attention = \"linformer\"\n");
  CHECK(kinds_used_elsewhere(single, "model.attention").empty());
}
