// Fine-tuning from another run's weights (train.init_from) and freezing by name patterns
// (train.freeze), through the trainer's public structures: patterns select the names they
// promise; a run started from a base run holds the base's frozen tensors bit for bit after
// training while the rest moves; frozen parameters have no optimizer state; shapes that do not
// fit are refused naming the tensor; a resumed fine-tune is bit-identical to one that never
// stopped.
#include <doctest/doctest.h>

#include <cstring>
#include <stdexcept>

#include "common/error.hpp"
#include "train/checkpoint.hpp"
#include "train/fine_tuning.hpp"
#include "train/trainer.hpp"
#include "train_fixture.hpp"

using namespace patchbay;
using train::testing::TinySetup;

namespace {

bool same_bytes(const engine::Tensor& x, const engine::Tensor& y) {
  return x.nbytes() == y.nbytes() && std::memcmp(x.data_ptr(), y.data_ptr(), x.nbytes()) == 0;
}

// A 6-step base run in folder/base; returns its folder.
std::filesystem::path train_base(TinySetup& setup, const std::filesystem::path& folder) {
  const std::filesystem::path base = folder / "base";
  train::train_model(setup.config(train::testing::tiny_config_text(folder),
                                  {"train.out_dir=\"" + base.string() + "\""}),
                     setup.registry, setup.lookup, train::testing::quiet_request());
  return base;
}

std::vector<std::string> fine_tune_overrides(const std::filesystem::path& base,
                                             const std::filesystem::path& out,
                                             const std::string& freeze) {
  return {"train.init_from=\"" + base.string() + "\"", "train.freeze=" + freeze,
          "train.out_dir=\"" + out.string() + "\"", "run.seed=11"};
}

}  // namespace

TEST_CASE("name patterns: globs, number ranges, prefixes at dots, aliases") {
  CHECK(train::name_matches("wte", "wte.weight"));
  CHECK(train::name_matches("embedding", "wte.weight"));
  CHECK(train::name_matches("embedding", "wpe.weight"));
  CHECK_FALSE(train::name_matches("embedding", "blocks.0.attn.qkv.weight"));
  CHECK(train::name_matches("blocks.0", "blocks.0.attn.qkv.weight"));
  CHECK_FALSE(train::name_matches("blocks.1", "blocks.10.attn.qkv.weight"));
  CHECK(train::name_matches("blocks.0-19.*", "blocks.19.ffn.fc.weight"));
  CHECK_FALSE(train::name_matches("blocks.0-19.*", "blocks.20.ffn.fc.weight"));
  // Bounds of any length are bounds (saturated), never an out-of-range error (issue 39).
  CHECK(train::name_matches("blocks.0-99999999999999999999999.*", "blocks.7.ffn.fc.weight"));
  CHECK_FALSE(train::name_matches("blocks.99999999999999999999-99999999999999999999.*",
                                  "blocks.7.ffn.fc.weight"));
  CHECK(train::name_matches("layers.2-3.*", "blocks.3.norm1.gain"));
  CHECK(train::name_matches("*.attn.*", "blocks.7.attn.proj.weight"));
  CHECK_FALSE(train::name_matches("*.attn.*", "blocks.7.ffn.proj.weight"));
  CHECK(train::name_matches("blocks.?.norm?.gain", "blocks.3.norm2.gain"));
  CHECK_FALSE(train::name_matches("wte.weigh", "wte.weight"));
}

TEST_CASE(
    "init_from + freeze: frozen tensors keep the base's bits, the rest trains, no optimizer "
    "state") {
  TinySetup setup;
  const auto folder = train::testing::fresh_folder("finetune_freeze");
  train::testing::write_tiny_corpus(folder);
  const std::filesystem::path base = train_base(setup, folder);
  const train::Checkpoint base_checkpoint = train::load_checkpoint(base);

  const std::filesystem::path tuned = folder / "tuned";
  const config::ResolvedConfig c =
      setup.config(train::testing::tiny_config_text(folder),
                   fine_tune_overrides(base, tuned, "[\"wte\", \"blocks.0\"]"));
  const train::TrainSummary summary =
      train::train_model(c, setup.registry, setup.lookup, train::testing::quiet_request());
  CHECK(summary.start_step == 0);
  REQUIRE(summary.steps_done == 6);
  const train::Checkpoint after = train::load_checkpoint(tuned);
  CHECK(after.meta(train::kMetaInitFrom) ==
        std::filesystem::absolute(base).lexically_normal().string());
  int frozen = 0, trained = 0;
  for (const std::string& name : base_checkpoint.names()) {
    if (name.rfind(train::kOptimizerPrefix, 0) == 0) continue;
    INFO("tensor " << name);
    REQUIRE(after.contains(name));
    const bool is_frozen = name == "wte.weight" || name.rfind("blocks.0.", 0) == 0;
    if (is_frozen) {
      CHECK(same_bytes(after.tensor(name), base_checkpoint.tensor(name)));
      ++frozen;
    } else if (name.find("gain") == std::string::npos && name.find("bias") == std::string::npos) {
      CHECK_FALSE(same_bytes(after.tensor(name), base_checkpoint.tensor(name)));
      ++trained;
    }
  }
  CHECK(frozen >= 5);
  CHECK(trained >= 3);
  // The optimizer keeps state for trained parameters only.
  bool state_for_trained = false;
  for (const auto& [state_name, tensor] : after.optimizer_state()) {
    INFO("optimizer state " << state_name);
    CHECK(state_name.find("wte.weight") == std::string::npos);
    CHECK(state_name.find("blocks.0.") == std::string::npos);
    state_for_trained = state_for_trained || state_name.find("blocks.1.") != std::string::npos;
  }
  CHECK(state_for_trained);
}

TEST_CASE("init_from refuses weights that do not fit, naming the tensors") {
  TinySetup setup;
  const auto folder = train::testing::fresh_folder("finetune_mismatch");
  train::testing::write_tiny_corpus(folder);
  const std::filesystem::path base = train_base(setup, folder);
  std::vector<std::string> overrides = fine_tune_overrides(base, folder / "wide", "[]");
  overrides.push_back("model.d_model=48");
  const config::ResolvedConfig c =
      setup.config(train::testing::tiny_config_text(folder), overrides);
  try {
    train::train_model(c, setup.registry, setup.lookup, train::testing::quiet_request());
    FAIL("a model of another width was accepted");
  } catch (const Error& e) {
    const std::string message = e.what();
    CHECK(message.find("shapes differ") != std::string::npos);
    CHECK(message.find("wte.weight ([") != std::string::npos);
    CHECK(message.find("48]") != std::string::npos);
    CHECK(message.find("include its config.toml") != std::string::npos);
  }
  // Learned positions dropped: the base's wpe.weight has no place in the model.
  std::vector<std::string> rotary = fine_tune_overrides(base, folder / "rotary", "[]");
  rotary.push_back("model.positional=\"rotary\"");
  try {
    train::train_model(setup.config(train::testing::tiny_config_text(folder), rotary),
                       setup.registry, setup.lookup, train::testing::quiet_request());
    FAIL("an extra tensor was accepted");
  } catch (const Error& e) {
    CHECK(std::string(e.what()).find("not in the model: wpe.weight") != std::string::npos);
  }
}

TEST_CASE("freeze patterns that match nothing are refused, listing the names") {
  TinySetup setup;
  const auto folder = train::testing::fresh_folder("finetune_badfreeze");
  train::testing::write_tiny_corpus(folder);
  const config::ResolvedConfig c =
      setup.config(train::testing::tiny_config_text(folder), {"train.freeze=[\"encoder.*\"]"});
  try {
    train::build_trainable_model(c, setup.registry, setup.lookup, 40);
    FAIL("a pattern matching nothing was accepted");
  } catch (const Error& e) {
    const std::string message = e.what();
    CHECK(message.find("'encoder.*' matches no parameter") != std::string::npos);
    CHECK(message.find("blocks.0.attn.qkv.weight") != std::string::npos);
  }
}

TEST_CASE("a resumed fine-tune (init_from + freeze) is bit-identical to one that never stopped") {
  TinySetup setup;
  const auto folder = train::testing::fresh_folder("finetune_resume");
  train::testing::write_tiny_corpus(folder);
  const std::filesystem::path base = train_base(setup, folder);
  const train::TrainSummary full =
      train::train_model(setup.config(train::testing::tiny_config_text(folder),
                                      fine_tune_overrides(base, folder / "straight", "[\"wte\"]")),
                         setup.registry, setup.lookup, train::testing::quiet_request());
  const config::ResolvedConfig resumed_config =
      setup.config(train::testing::tiny_config_text(folder),
                   fine_tune_overrides(base, folder / "resumed", "[\"wte\"]"));
  train::TrainRequest stop_at_3 = train::testing::quiet_request();
  stop_at_3.before_step = [](int64_t step, const std::vector<model::NamedParameter>&) {
    if (step == 3) throw std::runtime_error("interrupted");
  };
  CHECK_THROWS_WITH(train::train_model(resumed_config, setup.registry, setup.lookup, stop_at_3),
                    "interrupted");
  // The base may be gone by now: a full fine-tune's checkpoints hold every weight.
  std::filesystem::rename(base, folder / "base_moved");
  train::TrainRequest resume = train::testing::quiet_request();
  resume.resume = folder / "resumed";
  const train::TrainSummary second =
      train::train_model(resumed_config, setup.registry, setup.lookup, resume);
  CHECK(second.start_step == 3);
  CHECK(second.last_loss == full.last_loss);
  const train::Checkpoint a = train::load_checkpoint(folder / "straight"),
                          b = train::load_checkpoint(folder / "resumed");
  REQUIRE(a.names() == b.names());
  for (const std::string& name : a.names()) {
    INFO("tensor " << name);
    CHECK(same_bytes(a.tensor(name), b.tensor(name)));
  }
}
