// Tiny end-to-end training runs with the real plugins: a model overfits one fixed batch; a
// resumed run is bit-identical to an uninterrupted one (dropout off and on); a NaN stops the
// run with a clear message and leaves the previous checkpoint loadable; checkpoints hold the
// parameters, the optimizer state and the metadata they promise.
#include <doctest/doctest.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <nlohmann/json.hpp>
#include <set>
#include <stdexcept>

#include "run/metrics_log.hpp"
#include "train/checkpoint.hpp"
#include "train/trainer.hpp"
#include "train/training_data.hpp"
#include "train_fixture.hpp"

using namespace patchbay;
using train::testing::TinySetup;

namespace {

// Every tensor of two checkpoints equal byte for byte (same names, same order).
void check_same_tensors(const train::Checkpoint& a, const train::Checkpoint& b) {
  REQUIRE(a.names() == b.names());
  for (const std::string& name : a.names()) {
    const engine::Tensor x = a.tensor(name), y = b.tensor(name);
    REQUIRE(x.nbytes() == y.nbytes());
    INFO("tensor " << name);
    CHECK(std::memcmp(x.data_ptr(), y.data_ptr(), x.nbytes()) == 0);
  }
}

void check_resume_is_bit_identical(const std::string& name, const std::vector<std::string>& extra) {
  TinySetup setup;
  const auto folder = train::testing::fresh_folder(name);
  train::testing::write_tiny_corpus(folder);
  train::TrainRequest quiet;
  quiet.show_progress = false;
  quiet.print_samples = false;

  std::vector<std::string> straight = extra;
  straight.push_back("train.out_dir=\"" + (folder / "straight").string() + "\"");
  const train::TrainSummary full =
      train::train_model(setup.config(train::testing::tiny_config_text(folder), straight), setup.registry,
                         setup.lookup, quiet);
  REQUIRE(full.steps_done == 6);

  std::vector<std::string> first = extra;
  first.push_back("train.out_dir=\"" + (folder / "resumed").string() + "\"");
  // the stopped run's schedule is the 6-step one: only max_steps differs while it runs 3 steps
  const config::ResolvedConfig resumed_config = setup.config(train::testing::tiny_config_text(folder), first);
  train::TrainRequest stop_at_3 = quiet;
  stop_at_3.before_step = [](int64_t step, const std::vector<model::NamedParameter>&) {
    if (step == 3) throw std::runtime_error("interrupted");  // as if the process died here
  };
  CHECK_THROWS_WITH(train::train_model(resumed_config, setup.registry, setup.lookup, stop_at_3), "interrupted");
  train::TrainRequest resume = quiet;
  resume.resume = folder / "resumed";
  const train::TrainSummary second = train::train_model(resumed_config, setup.registry, setup.lookup, resume);
  CHECK(second.start_step == 3);
  CHECK(second.steps_done == 6);
  CHECK(second.last_loss == full.last_loss);
  check_same_tensors(train::load_checkpoint(folder / "straight"), train::load_checkpoint(folder / "resumed"));
}

}  // namespace

TEST_CASE("a tiny model overfits one fixed batch") {
  TinySetup setup;
  const auto folder = train::testing::fresh_folder("overfit");
  train::testing::write_tiny_corpus(folder);
  const config::ResolvedConfig c =
      setup.config(train::testing::tiny_config_text(folder), {"train.lr=0.01", "train.schedule=\"constant\""});
  train::TrainOptions o = train::train_options_from_config(c);
  train::TrainingData data = train::prepare_training_data(c, setup.registry, setup.lookup);
  train::TrainableModel t = train::build_trainable_model(c, setup.registry, setup.lookup, data.tokenizer.vocab_size());
  const train::Batch batch = train::training_batch(data.train, 1, 0, 0, o.batch_size, o.seq_len);
  o.schedule.warmup_steps = 0;
  double first = 0, last = 0;
  for (int64_t step = 0; step < 80; ++step) {
    const train::StepResult r = train::train_step(t, o, step, [&](int64_t) { return batch; });
    REQUIRE(r.finite);
    if (step == 0) first = r.loss;
    last = r.loss;
  }
  CHECK(first > 3.0);  // about ln(vocab) at initialisation
  CHECK(last < 0.3);
}

TEST_CASE("resuming is bit-identical to an uninterrupted run, dropout off") {
  check_resume_is_bit_identical("resume_plain", {});
}

TEST_CASE("resuming is bit-identical to an uninterrupted run, dropout on") {
  check_resume_is_bit_identical("resume_dropout", {"model.dropout=0.2"});
}

TEST_CASE("resuming is bit-identical with Performer features redrawn every 2 training forwards") {
  // The redraw count is checkpointed state: a resumed run redraws at the same forwards (and with
  // dropout on, the replayed forwards run before the restore, so they do not advance it twice).
  const std::vector<std::string> performer = {"model.attention.kind=\"performer\"",
                                              "model.attention.performer.redraw_interval=2"};
  check_resume_is_bit_identical("resume_performer", performer);
  std::vector<std::string> with_dropout = performer;
  with_dropout.push_back("model.dropout=0.2");
  check_resume_is_bit_identical("resume_performer_dropout", with_dropout);
}

TEST_CASE("non-trainable plugin state is checkpointed but never moved by the optimizer") {
  // Performer's features with redraw off must stay the initial draw under AdamW weight decay;
  // its redraw count counts every training forward.
  TinySetup setup;
  const auto folder = train::testing::fresh_folder("frozen_state");
  train::testing::write_tiny_corpus(folder);
  const config::ResolvedConfig c = setup.config(
      train::testing::tiny_config_text(folder),
      {"model.attention.kind=\"performer\"", "model.attention.performer.redraw_interval=0",
       "optimizer.adamw.weight_decay=0.5", "train.out_dir=\"" + (folder / "run").string() + "\""});
  train::TrainingData data = train::prepare_training_data(c, setup.registry, setup.lookup);
  const train::TrainableModel fresh =
      train::build_trainable_model(c, setup.registry, setup.lookup, data.tokenizer.vocab_size());
  train::TrainRequest quiet;
  quiet.show_progress = false;
  quiet.print_samples = false;
  REQUIRE(train::train_model(c, setup.registry, setup.lookup, quiet).steps_done == 6);
  const train::Checkpoint trained = train::load_checkpoint(folder / "run");
  int features = 0, counters = 0;
  for (const model::NamedParameter& p : fresh.parameters) {
    const std::string& n = p.name;
    if (n.size() > 14 && n.ends_with("features.omega")) {
      ++features;
      INFO(n);
      CHECK_FALSE(p.tensor.requires_grad());
      const engine::Tensor stored = trained.tensor(n);
      REQUIRE(stored.nbytes() == p.tensor.nbytes());
      CHECK(std::memcmp(stored.data_ptr(), p.tensor.data_ptr(), stored.nbytes()) == 0);
    }
    if (n.ends_with("features.training_forwards")) {
      ++counters;
      const std::vector<float> halves = trained.tensor(n).to_vector();  // {count / 2^24, rest}
      CHECK(halves == std::vector<float>{0.f, 6.f});  // 6 steps, one micro-batch each
    }
  }
  CHECK(features == 2);
  CHECK(counters == 2);
  for (const auto& [name, state] : trained.optimizer_state()) CHECK(name.find("features.") == std::string::npos);
}

TEST_CASE("a NaN stops the run with a message and keeps the last good checkpoint loadable") {
  TinySetup setup;
  const auto folder = train::testing::fresh_folder("nan");
  train::testing::write_tiny_corpus(folder);
  const config::ResolvedConfig c = setup.config(train::testing::tiny_config_text(folder), {"train.checkpoint_every=2"});
  train::TrainRequest request;
  request.show_progress = false;
  request.print_samples = false;
  request.before_step = [](int64_t step, const std::vector<model::NamedParameter>& params) {
    if (step == 4) params[0].tensor.data<float>()[0] = std::numeric_limits<float>::quiet_NaN();
  };
  const train::TrainSummary summary = train::train_model(c, setup.registry, setup.lookup, request);
  CHECK(summary.numeric_failure);
  CHECK(summary.steps_done == 4);
  CHECK(summary.failure_message.find("step 5") != std::string::npos);
  CHECK(summary.failure_message.find("train.lr") != std::string::npos);
  CHECK(summary.failure_message.find("step_4.safetensors") != std::string::npos);
  const train::Checkpoint latest = train::load_checkpoint(folder / "run");
  CHECK(latest.step() == 4);
  for (const std::string& name : latest.names()) {
    const std::vector<float> values = latest.tensor(name).to_vector();
    for (float v : values) REQUIRE(std::isfinite(v));
  }
  const std::vector<nlohmann::json> metrics = run::read_metrics(folder / "run" / "metrics.jsonl");
  REQUIRE(!metrics.empty());
  CHECK(metrics.back()["step"] == 5);
  CHECK(metrics.back()["loss"].is_null());  // NaN is written as null
}

TEST_CASE("a checkpoint holds parameters, optimizer state and self-describing metadata") {
  TinySetup setup;
  const auto folder = train::testing::fresh_folder("contents");
  train::testing::write_tiny_corpus(folder);
  const config::ResolvedConfig c = setup.config(train::testing::tiny_config_text(folder), {"train.max_steps=3"});
  train::TrainRequest request;
  request.show_progress = false;
  request.print_samples = false;
  const train::TrainSummary summary = train::train_model(c, setup.registry, setup.lookup, request);
  REQUIRE(summary.last_checkpoint.filename() == "step_3.safetensors");
  const train::Checkpoint ck = train::load_checkpoint(folder / "run");
  CHECK(ck.step() == 3);
  CHECK(ck.contains("wte.weight"));
  CHECK(ck.contains("wpe.weight"));
  CHECK(ck.contains("norm_f.gain"));
  int optimizer_tensors = 0;
  for (const std::string& name : ck.names()) optimizer_tensors += name.rfind("optimizer/", 0) == 0 ? 1 : 0;
  CHECK(optimizer_tensors > 0);
  CHECK(ck.optimizer_state().size() == static_cast<size_t>(optimizer_tensors));
  for (const char* key : {train::kMetaConfig, train::kMetaComponents, train::kMetaSdkAbi, train::kMetaSourceRevision,
                          train::kMetaRng, train::kMetaTokenizerFile, train::kMetaTokenizerHash}) {
    INFO("metadata key " << key);
    CHECK(ck.metadata().count(key) == 1);
  }
  const nlohmann::json components = nlohmann::json::parse(ck.meta(train::kMetaComponents));
  std::set<std::string> names;
  for (const auto& entry : components) {
    names.insert(entry["kind"].get<std::string>() + ":" + entry["name"].get<std::string>());
    CHECK(!entry["plugin_version"].get<std::string>().empty());
    CHECK(!entry["plugin_abi"].get<std::string>().empty());
  }
  CHECK(names.count("optimizer:adamw") == 1);
  CHECK(names.count("tokenizer:char") == 1);
  CHECK(names.count("attention:dense") == 1);
  CHECK(names.count("feedforward:mlp") == 1);
  CHECK(std::filesystem::exists(ck.meta(train::kMetaTokenizerFile)));
  // the stored config is the resolved one: it loads and validates again
  CHECK_NOTHROW(setup.config(ck.config_text()));
  CHECK(std::filesystem::exists(folder / "run" / "config.toml"));
}

TEST_CASE("a fresh run refuses a run directory that holds a run, unless told to overwrite") {
  TinySetup setup;
  const auto folder = train::testing::fresh_folder("reuse");
  train::testing::write_tiny_corpus(folder);
  const config::ResolvedConfig c = setup.config(train::testing::tiny_config_text(folder), {"train.max_steps=2"});
  train::TrainRequest request;
  request.show_progress = false;
  request.print_samples = false;
  train::train_model(c, setup.registry, setup.lookup, request);
  const size_t first_records = run::read_metrics(folder / "run" / "metrics.jsonl").size();
  try {
    train::train_model(c, setup.registry, setup.lookup, request);
    FAIL("a second fresh run in the same folder must be refused");
  } catch (const patchbay::Error& e) {
    const std::string message = e.what();
    CHECK(message.find("already holds a run") != std::string::npos);
    CHECK(message.find("--resume") != std::string::npos);
    CHECK(message.find("--overwrite") != std::string::npos);
  }
  request.overwrite = true;
  train::train_model(c, setup.registry, setup.lookup, request);
  // the replaced run's metrics start again instead of being appended to the old ones
  CHECK(run::read_metrics(folder / "run" / "metrics.jsonl").size() == first_records);
}

TEST_CASE("train.keep_checkpoints keeps the newest N step checkpoints, and the run resumes") {
  TinySetup setup;
  const auto folder = train::testing::fresh_folder("keep_checkpoints");
  train::testing::write_tiny_corpus(folder);
  train::TrainRequest quiet;
  quiet.show_progress = false;
  quiet.print_samples = false;
  const std::string text = train::testing::tiny_config_text(folder);
  const config::ResolvedConfig c = setup.config(
      text, {"train.max_steps=5", "train.checkpoint_every=1", "train.keep_checkpoints=2"});
  train::train_model(c, setup.registry, setup.lookup, quiet);
  const std::vector<std::filesystem::path> kept =
      train::step_checkpoints(folder / "run" / "checkpoints");
  REQUIRE(kept.size() == 2);
  CHECK(kept[0].filename() == "step_5.safetensors");
  CHECK(kept[1].filename() == "step_4.safetensors");
  CHECK(train::load_checkpoint(folder / "run").step() == 5);
  // Resuming from the newest and training on prunes as it goes.
  train::TrainRequest resume = quiet;
  resume.resume = folder / "run";
  const config::ResolvedConfig longer = setup.config(
      text, {"train.max_steps=7", "train.checkpoint_every=1", "train.keep_checkpoints=2"});
  const train::TrainSummary more = train::train_model(longer, setup.registry, setup.lookup, resume);
  CHECK(more.start_step == 5);
  const std::vector<std::filesystem::path> after =
      train::step_checkpoints(folder / "run" / "checkpoints");
  REQUIRE(after.size() == 2);
  CHECK(after[0].filename() == "step_7.safetensors");
  // 0 keeps every checkpoint (the default).
  const auto all = train::testing::fresh_folder("keep_all_checkpoints");
  train::testing::write_tiny_corpus(all);
  train::train_model(
      setup.config(train::testing::tiny_config_text(all),
                   {"train.max_steps=3", "train.checkpoint_every=1"}),
      setup.registry, setup.lookup, quiet);
  CHECK(train::step_checkpoints(all / "run" / "checkpoints").size() == 3);
}
