// train.objective = "span_corruption" through the trainer (core/train/
// objective_span_corruption.cpp) on a tiny character encoder-decoder with the real plugins:
//   - the sentinels and <pad> are special tokens, <extra_id_0> the highest id, descending;
//   - a batch: each row's source with its sentinels replaced by the spans the targets list
//     after them gives back the window's tokens; decoder inputs are the targets shifted right
//     after <pad>; padding masks match; batches are pure functions of (seed, step, micro);
//   - refusals: span_corruption with a single-stack model, clm / mlm with an encoder-decoder,
//     a source given to a single-stack model;
//   - a short run lowers the loss, and a resumed run is bit-identical.
#include <doctest/doctest.h>

#include <cstring>
#include <functional>
#include <map>
#include <nlohmann/json.hpp>
#include <stdexcept>
#include <string>
#include <vector>

#include "../train/resume_check.hpp"
#include "../train/train_fixture.hpp"
#include "common/error.hpp"
#include "run/metrics_log.hpp"
#include "train/checkpoint.hpp"
#include "train/objective.hpp"
#include "train/trainer.hpp"
#include "train/training_data.hpp"

using namespace patchbay;
using train::testing::TinySetup;

namespace {

std::vector<std::string> seq2seq_overrides(std::vector<std::string> extra = {}) {
  std::vector<std::string> o = {"model.architecture=\"encoder_decoder\"",
                                "model.positional=\"t5_relative\"",
                                "model.norm=\"rmsnorm\"",
                                "model.relative_attention_num_buckets=8",
                                "model.relative_attention_max_distance=32",
                                "train.objective=\"span_corruption\"",
                                "train.span_corruption.sentinels=8"};
  o.insert(o.end(), extra.begin(), extra.end());
  return o;
}

std::string error_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const std::exception& e) {
    return e.what();
  }
  return "(no error)";
}

std::vector<int32_t> row_of(const engine::Tensor& t, int64_t row) {
  const engine::Tensor c = t.contiguous();
  const int32_t* d = c.data<int32_t>();
  return std::vector<int32_t>(d + row * t.size(1), d + (row + 1) * t.size(1));
}

}  // namespace

TEST_CASE("span corruption batches: sentinels are special tokens, rows rebuild their windows") {
  TinySetup setup;
  const auto folder = train::testing::fresh_folder("span_batch");
  train::testing::write_tiny_corpus(folder);
  const config::ResolvedConfig c = setup.config(train::testing::tiny_config_text(folder),
                                                seq2seq_overrides({"train.seq_len=32"}));
  const train::TrainOptions o = train::train_options_from_config(c);
  train::TrainingData data = train::prepare_training_data(c, setup.registry, setup.lookup);
  std::map<std::string, int32_t> special;
  for (const runtime::SpecialTokenInfo& s : data.tokenizer.special_tokens()) special[s.text] = s.id;
  REQUIRE(special.count("<pad>") == 1);
  REQUIRE(special.count("<extra_id_0>") == 1);
  REQUIRE(special.count("<extra_id_7>") == 1);
  CHECK(special.count("<extra_id_8>") == 0);
  CHECK(special["<extra_id_0>"] == data.tokenizer.vocab_size() - 1);
  for (int k = 0; k < 8; ++k)
    CHECK(special["<extra_id_" + std::to_string(k) + ">"] == special["<extra_id_0>"] - k);
  const int32_t pad = special["<pad>"], top = special["<extra_id_0>"];

  const std::unique_ptr<train::TrainingObjective> objective =
      train::make_objective(c, o, data.tokenizer);
  const train::TokenWindows windows =
      train::training_windows(data.train, o.seed, 0, 0, o.batch_size, o.seq_len);
  const train::Batch batch = objective->training_batch(windows, o.seed, 0, 0);
  REQUIRE(batch.source.defined());
  CHECK(batch.source.size(0) == o.batch_size);
  CHECK(batch.source.size(1) <= o.seq_len);
  int64_t noise = 0;
  for (int64_t r = 0; r < o.batch_size; ++r) {
    const std::vector<int32_t> window = row_of(windows.ids, r);
    const std::vector<int32_t> source = row_of(batch.source, r), targets = row_of(batch.targets, r);
    const std::vector<int32_t> inputs = row_of(batch.inputs, r);
    const std::vector<int32_t> sp = row_of(batch.source_padding, r),
                               tp = row_of(batch.target_padding, r);
    // Spans by sentinel from the targets.
    std::map<int32_t, std::vector<int32_t>> spans;
    int32_t current = -1;
    for (size_t i = 0; i < targets.size(); ++i) {
      INFO("row " << r << " target " << i);
      CHECK((tp[i] == 1) == (targets[i] != train::kIgnoreTarget));
      if (tp[i] == 0) {
        CHECK(inputs[i] == pad);
        continue;
      }
      CHECK(inputs[i] == (i == 0 ? pad : targets[i - 1]));
      if (targets[i] > top - 8 && targets[i] <= top) {
        current = targets[i];
        spans[current];
      } else {
        REQUIRE(current >= 0);
        spans[current].push_back(targets[i]);
        ++noise;
      }
    }
    std::vector<int32_t> rebuilt;
    for (size_t i = 0; i < source.size(); ++i) {
      if (sp[i] == 0) {
        CHECK(source[i] == pad);
        continue;
      }
      if (spans.count(source[i]) != 0)
        rebuilt.insert(rebuilt.end(), spans[source[i]].begin(), spans[source[i]].end());
      else
        rebuilt.push_back(source[i]);
    }
    INFO("row " << r);
    CHECK(rebuilt == std::vector<int32_t>(window.begin(), window.begin() + o.seq_len));
  }
  // 15% of 32 tokens is round(4.8) = 5 noise tokens per row, in round(5 / 3) = 2 spans (one
  // span would always sit at the end: T5's spans alternate from non-noise and end with noise).
  CHECK(noise == 5 * o.batch_size);
  // Pure functions of their arguments.
  const train::Batch again = objective->training_batch(windows, o.seed, 0, 0);
  CHECK(row_of(again.source, 1) == row_of(batch.source, 1));
  const train::Batch other = objective->training_batch(windows, o.seed, 1, 0);
  bool differs = false;
  for (int64_t r = 0; r < o.batch_size; ++r)
    differs = differs || row_of(other.targets, r) != row_of(batch.targets, r);
  CHECK(differs);
}

TEST_CASE("encoder-decoder objectives and architectures must agree") {
  TinySetup setup;
  const auto folder = train::testing::fresh_folder("span_refusals");
  const std::string text = train::testing::tiny_config_text(folder);
  CHECK(error_of([&] {
          setup.config(text, {"train.objective=\"span_corruption\""});
        }).find("model.architecture is \"single_stack\", which has no encoder") !=
        std::string::npos);
  CHECK(error_of([&] {
          setup.config(
              text, {"model.architecture=\"encoder_decoder\"", "model.positional=\"t5_relative\""});
        }).find("needs a source for its encoder, which train.objective = \"clm\"") !=
        std::string::npos);
  CHECK(error_of([&] {
          setup.config(
              text, {"model.architecture=\"encoder_decoder\"", "model.positional=\"t5_relative\"",
                     "model.causal=false", "train.objective=\"mlm\""});
        }).find("train.objective = \"mlm\" does not give") != std::string::npos);
  CHECK(error_of([&] {
          setup.config(text, seq2seq_overrides({"model.cross_attention=\"lsh\""}));
          train::testing::write_tiny_corpus(folder);
          train::TrainRequest quiet;
          quiet.show_progress = false;
          train::train_model(
              setup.config(text, seq2seq_overrides({"model.cross_attention=\"lsh\""})),
              setup.registry, setup.lookup, quiet);
        }).find("model.cross_attention = \"lsh\"") != std::string::npos);
}

TEST_CASE("a short span-corruption run lowers its loss and resumes bit-identically") {
  TinySetup setup;
  const auto folder = train::testing::fresh_folder("span_run");
  train::testing::write_tiny_corpus(folder);
  train::TrainRequest quiet;
  quiet.show_progress = false;
  quiet.print_samples = false;
  const std::string text = train::testing::tiny_config_text(folder);
  std::vector<std::string> overrides =
      seq2seq_overrides({"train.max_steps=120", "train.eval_every=60", "train.eval_batches=4",
                         "train.checkpoint_every=0", "train.lr=0.01", "train.batch_size=16"});
  overrides.push_back("train.out_dir=\"" + (folder / "long").string() + "\"");
  const train::TrainSummary s =
      train::train_model(setup.config(text, overrides), setup.registry, setup.lookup, quiet);
  REQUIRE(s.steps_done == 120);
  std::vector<nlohmann::json> evals, steps;
  for (const nlohmann::json& r : run::read_metrics(folder / "long" / "metrics.jsonl"))
    (r.contains("val_loss") ? evals : steps).push_back(r);
  REQUIRE(evals.size() == 2);
  const double first_loss = steps.front()["loss"].get<double>();
  MESSAGE("span corruption: first train loss " << first_loss << ", val " << evals[0]["val_loss"]
                                               << " -> " << evals[1]["val_loss"]);
  CHECK(evals[0]["objective"] == "span_corruption");
  CHECK(evals[1]["val_loss"].get<double>() < first_loss - 1.0);
  CHECK(s.last_sample.empty());

  const std::vector<std::string> short_run = {"train.max_steps=6", "train.checkpoint_every=3"};
  train::testing::check_resume_bit_identical(setup, text, seq2seq_overrides(short_run), folder,
                                             quiet);
}
