// Component swaps with the real plugins: each shipped config's components swap in one
// override (tokenizer char <-> bpe, optimizer adamw <-> sgd), layers swap to the test-only
// probes of test_plugin/ (whose parameter lengths show which options reached which block)
// by `--set X.kind`, by an inline-table `--set` and by an including config, a pattern gives
// each kind its own options, and sampler chain entries keep several samplers' options.
#include <doctest/doctest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "config/component_view.hpp"
#include "config/config_loader.hpp"
#include "generate/sampler_config.hpp"
#include "model/language_model.hpp"
#include "patchbay/testing/temp_dir.hpp"
#include "runtime/registry.hpp"
#include "train/train_config.hpp"

namespace fs = std::filesystem;
namespace cfg = patchbay::config;
namespace rt = patchbay::runtime;
namespace tr = patchbay::train;

namespace {

const std::string kConfigs = PATCHBAY_CONFIGS;

// The built-in plugins plus the probe plugin, and the schema lookup over them.
struct Plugins {
  rt::Registry registry;
  cfg::ComponentSchemaLookup lookup;
  Plugins() {
    rt::SearchPathOptions search;
    search.cli_paths = {CONFIG_SWAP_PROBE_PLUGIN_DIR};
    registry.scan(rt::plugin_search_path(search));
    lookup = tr::registry_schema_lookup(registry);
  }
  static Plugins& get() {
    static Plugins* plugins = new Plugins();
    return *plugins;
  }
};

cfg::ResolvedConfig validated(cfg::ResolvedConfig config) {
  tr::validate_training_config(config, Plugins::get().lookup);
  return config;
}

cfg::ResolvedConfig shipped(const std::string& name, const std::vector<std::string>& overrides) {
  return validated(cfg::load_config(kConfigs + "/" + name, overrides));
}

// Tiny model dimensions on top of a shipped config, so building it takes milliseconds.
std::vector<std::string> tiny(std::vector<std::string> overrides) {
  for (const char* o :
       {"model.n_layers=2", "model.d_model=16", "model.n_heads=2", "model.context_length=8"}) {
    overrides.emplace_back(o);
  }
  return overrides;
}

std::unique_ptr<patchbay::model::LanguageModel> build_model(const cfg::ResolvedConfig& config) {
  return patchbay::model::LanguageModel::build(
      patchbay::model::model_options_from_config(config, 11),
      patchbay::model::component_tables_from_config(config), Plugins::get().registry);
}

// The length of parameter `name` (-1 when the model has none).
int64_t parameter_length(const patchbay::model::LanguageModel& model, const std::string& name) {
  for (const patchbay::model::NamedParameter& p : model.parameters()) {
    if (p.name == name) return p.tensor.numel();
  }
  return -1;
}

// A scratch folder of its own, removed when the test ends (also when it fails).
struct TempFolder {
  patchbay::testing::TempDir dir{"config_swap"};
  const fs::path& path = dir.path();
};

}  // namespace

TEST_CASE("optimizer: the quickstart swaps adamw -> sgd with --set optimizer.kind=sgd") {
  const cfg::ResolvedConfig config = shipped("quickstart.toml", {"optimizer.kind=sgd"});
  CHECK(config.find("optimizer.sgd.momentum")->value<double>() == 0.9);
  CHECK(config.find("optimizer.adamw") == nullptr);
  const cfg::SelectedComponent sgd =
      cfg::select_component(config, tr::make_training_schema(), Plugins::get().lookup, "optimizer");
  CHECK(sgd.name == "sgd");
  CHECK(sgd.config.find("momentum")->float_value == 0.9);
  CHECK_NOTHROW(Plugins::get().registry.create(PB_KIND_OPTIMIZER, "sgd", *sgd.config.view()));

  const cfg::ResolvedConfig adamw = shipped("quickstart.toml", {});
  CHECK(adamw.find("optimizer.adamw.beta2")->value<double>() == 0.99);
  CHECK(shipped("gpt2-124m.toml", {"optimizer.kind=sgd"})
            .find("optimizer.sgd.momentum")
            ->value<double>() == 0.0);
}

TEST_CASE("tokenizer: char <-> bpe in one override each way") {
  const cfg::ResolvedConfig to_char = shipped("tokenizer_demo.toml", {"tokenizer.kind=char"});
  const cfg::SelectedComponent chosen = cfg::select_component(to_char, tr::make_training_schema(),
                                                              Plugins::get().lookup, "tokenizer");
  CHECK(chosen.name == "char");
  CHECK_NOTHROW(Plugins::get().registry.create_tokenizer("char", *chosen.config.view()));
  CHECK(to_char.find("tokenizer.bpe") == nullptr);

  const cfg::ResolvedConfig to_bpe =
      shipped("quickstart.toml", {"tokenizer.kind=bpe", "tokenizer.bpe.vocab_size=300"});
  const cfg::SelectedComponent bpe =
      cfg::select_component(to_bpe, tr::make_training_schema(), Plugins::get().lookup, "tokenizer");
  CHECK(bpe.config.find("vocab_size")->int_value == 300);
  CHECK_NOTHROW(Plugins::get().registry.create_tokenizer("bpe", *bpe.config.view()));
}

TEST_CASE("attention and feed-forward: --set kind with the new kind's own table") {
  const cfg::ResolvedConfig config =
      shipped("quickstart.toml",
              tiny({"model.attention.kind=window_probe", "model.attention.window_probe.window=5",
                    "model.feedforward.kind=width_probe"}));
  const auto model = build_model(config);
  CHECK(parameter_length(*model, "blocks.0.attn.window_probe") == 5);
  CHECK(parameter_length(*model, "blocks.1.attn.window_probe") == 5);
  CHECK(parameter_length(*model, "blocks.0.ffn.width_probe") == 3);  // the probe's default
  CHECK(parameter_length(*model, "blocks.0.attn.qkv.weight") == -1);
}

TEST_CASE(
    "attention and feed-forward: an inline-table --set replaces the table, pattern kinds get their "
    "own options") {
  const cfg::ResolvedConfig config = shipped(
      "quickstart.toml", tiny({"model.attention={kind=\"dense\", pattern=[\"window_probe\", "
                               "\"dense\"], window_probe={window=3}, "
                               "dense={dropout=0.0}}",
                               "model.feedforward={kind=\"width_probe\", width=6}"}));
  const auto model = build_model(config);
  CHECK(parameter_length(*model, "blocks.0.attn.window_probe") == 3);
  CHECK(parameter_length(*model, "blocks.1.attn.window_probe") == -1);  // block 1 is dense
  CHECK(parameter_length(*model, "blocks.1.attn.qkv.weight") > 0);
  CHECK(parameter_length(*model, "blocks.1.ffn.width_probe") == 6);

  // The probe requires its window: a pattern kind without its own table is reported.
  const std::vector<std::string> without_window{
      "model.attention={kind=\"dense\", pattern=[\"window_probe\", \"dense\"]}"};
  cfg::ResolvedConfig missing = cfg::load_config(kConfigs + "/quickstart.toml", without_window);
  CHECK_THROWS_WITH_AS(validated(std::move(missing)),
                       doctest::Contains("model.attention.window_probe.window"), patchbay::Error);
}

TEST_CASE(
    "attention, feed-forward and optimizer: a config including the quickstart swaps by naming "
    "kinds") {
  TempFolder folder;
  std::ofstream(folder.path / "swap.toml")
      << "include = [\"" << kConfigs << "/quickstart.toml\"]\n"
      << "[model]\nn_layers = 2\nd_model = 16\nn_heads = 2\ncontext_length = 8\n"
      << "[model.attention]\nkind = \"window_probe\"\n"
      << "[model.attention.window_probe]\nwindow = 7\n"
      << "[model.feedforward]\nkind = \"width_probe\"\n"
      << "[model.feedforward.width_probe]\nwidth = 2\n"
      << "[optimizer]\nkind = \"sgd\"\n";
  const cfg::ResolvedConfig config = validated(cfg::load_config(folder.path / "swap.toml"));
  const auto model = build_model(config);
  CHECK(parameter_length(*model, "blocks.1.attn.window_probe") == 7);
  CHECK(parameter_length(*model, "blocks.0.ffn.width_probe") == 2);
  CHECK(config.find("optimizer.sgd.momentum")->value<double>() == 0.9);
  CHECK(config.find("optimizer.adamw") == nullptr);
}

TEST_CASE("sampler chain: an entry keeps several samplers' options and its name picks one") {
  rt::Registry& registry = Plugins::get().registry;
  const auto chain_of = [&](const std::string& entry) {
    const toml::table document = toml::parse("[[generate.chain]]\n" + entry +
                                             "\n[[generate.chain]]\nname = \"sample\"\nseed = 3\n");
    return patchbay::generate::build_sampler_chain(
        *patchbay::generate::chain_entries_from_toml(document), registry);
  };
  const std::string options = "top_k = {k = 5}\ntop_p = {p = 0.5}\n";
  CHECK(chain_of("name = \"top_k\"\n" + options).describe().find("k=5") != std::string::npos);
  const std::string swapped = chain_of("name = \"top_p\"\n" + options).describe();
  CHECK(swapped.find("p=0.5") != std::string::npos);
  CHECK(swapped.find("k=5") == std::string::npos);
  // A flat key wins over the named sampler's table; a flat key of another sampler is an error.
  CHECK(chain_of("name = \"top_k\"\nk = 9\n" + options).describe().find("k=9") !=
        std::string::npos);
  CHECK_THROWS_WITH_AS(chain_of("name = \"top_p\"\nk = 9\n"), doctest::Contains("unknown key 'k'"),
                       patchbay::Error);
  // The options of an unused sampler are still checked against its own schema.
  CHECK_THROWS_WITH_AS(chain_of("name = \"top_k\"\ntop_p = {pp = 0.5}\n"),
                       doctest::Contains("generate.chain[0].top_p"), patchbay::Error);
  CHECK_THROWS_WITH_AS(chain_of("name = \"top_k\"\ntop_q = {p = 0.5}\n"),
                       doctest::Contains("top_q"), patchbay::Error);
}
