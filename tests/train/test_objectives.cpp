// The objective seam (core/train/objective.hpp): the table and its refusals, and each
// objective's batches and evaluation against the functions the trainer used before the seam
// (next-token windows; BERT masks from the same counter-based seeds), so the seam changes no
// number a run produces.
#include <doctest/doctest.h>

#include <functional>
#include <string>
#include <vector>

#include "common/error.hpp"
#include "train/batches.hpp"
#include "train/evaluator.hpp"
#include "train/objective.hpp"
#include "train/objective_mlm.hpp"
#include "train/trainer.hpp"
#include "train/training_data.hpp"
#include "train_fixture.hpp"

using namespace patchbay;
using train::testing::TinySetup;

namespace {

std::string error_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const std::exception& e) {
    return e.what();
  }
  return "(no error)";
}

const std::vector<std::string> kMlm = {"tokenizer.special_tokens=[\"<|endoftext|>\", \"<|mask|>\"]",
                                       "model.causal=false", "model.attention.causal=false",
                                       "train.objective=\"mlm\""};

}  // namespace

TEST_CASE("the objective table names every objective and refuses an unknown one") {
  std::vector<std::string> names;
  for (const train::ObjectiveEntry& e : train::objective_entries()) {
    names.push_back(e.name);
    CHECK(e.make);
    CHECK(!e.summary.empty());
  }
  CHECK(names == std::vector<std::string>{"clm", "mlm", "sft", "span_corruption", "seq2seq"});
  CHECK(&train::find_objective("mlm") == &train::objective_entries()[1]);
  const std::string message = error_of([] { train::find_objective("mlmm"); });
  CHECK(message.find("train.objective = \"mlmm\" is not a training objective") !=
        std::string::npos);
  CHECK(message.find("did you mean \"mlm\"") != std::string::npos);
  CHECK(message.find("clm: next-token prediction") != std::string::npos);

  TinySetup setup;
  const auto folder = train::testing::fresh_folder("objective_table");
  train::testing::write_tiny_corpus(folder);
  const std::string text = train::testing::tiny_config_text(folder);
  CHECK(error_of([&] {
          setup.config(text, {"train.objective=\"span\""});
        }).find("is not a training objective") != std::string::npos);
  // The objective's own section is part of the training schema, and its defaults are written.
  const config::ResolvedConfig mlm = setup.config(text, kMlm);
  CHECK(mlm.find("train.mlm.select_rate") != nullptr);
  CHECK(train::train_options_from_config(mlm).objective == "mlm");
  CHECK(train::train_options_from_config(setup.config(text)).objective == "clm");
}

TEST_CASE("clm: batches and evaluation are the next-token ones, samples are made") {
  TinySetup setup;
  const auto folder = train::testing::fresh_folder("objective_clm");
  train::testing::write_tiny_corpus(folder);
  const config::ResolvedConfig c = setup.config(train::testing::tiny_config_text(folder));
  const train::TrainOptions o = train::train_options_from_config(c);
  train::TrainingData data = train::prepare_training_data(c, setup.registry, setup.lookup);
  const auto objective = train::make_objective(c, o, data.tokenizer);
  CHECK(objective->name() == "clm");
  CHECK(objective->makes_samples());
  for (int64_t step : {0, 5}) {
    const train::TokenWindows w =
        train::training_windows(data.train, o.seed, step, 1, o.batch_size, o.seq_len);
    CHECK(w.ids.shape() == std::vector<int64_t>{o.batch_size, o.seq_len + 1});
    const train::Batch made = objective->training_batch(w, o.seed, step, 1);
    const train::Batch before =
        train::training_batch(data.train, o.seed, step, 1, o.batch_size, o.seq_len);
    CHECK(made.inputs.to_vector() == before.inputs.to_vector());
    CHECK(made.targets.to_vector() == before.targets.to_vector());
  }
  // A hand-built window: inputs are ids 0..T-1 of it, targets 1..T.
  const std::vector<int32_t> ids = {5, 6, 7, 8, 9, 1, 2, 3};
  const train::Batch b =
      train::causal_batch({engine::Tensor::from_data(ids.data(), {2, 4}, engine::DType::kI32)});
  CHECK(b.inputs.to_vector() == std::vector<float>{5, 6, 7, 9, 1, 2});
  CHECK(b.targets.to_vector() == std::vector<float>{6, 7, 8, 1, 2, 3});

  train::TrainableModel t =
      train::build_trainable_model(c, setup.registry, setup.lookup, data.tokenizer.vocab_size());
  const train::TokenBytes bytes = train::token_bytes(data.tokenizer);
  const train::EvalSettings settings{3, o.batch_size, o.seq_len, &bytes};
  const train::ObjectiveEvaluation seam = objective->evaluate(
      *t.model,
      [&](int64_t i) { return train::validation_windows(data.val, i, 3, o.batch_size, o.seq_len); },
      settings);
  const train::EvalResult direct = train::evaluate(*t.model, data.val, settings);
  CHECK(seam.eval.loss == direct.loss);  // bit for bit
  CHECK(seam.eval.tokens == direct.tokens);
  CHECK(seam.eval.bytes == direct.bytes);
  CHECK(seam.extra.empty());

  // Targets of kIgnoreTarget carry no loss in evaluation either: half ignored, half counted.
  const train::Batch full = train::validation_batch(data.val, 0, 1, o.batch_size, o.seq_len);
  train::Batch half = full;
  half.targets = full.targets.clone();
  int32_t* targets = half.targets.data<int32_t>();
  for (int64_t i = 0; i < half.targets.numel(); i += 2) targets[i] = train::kIgnoreTarget;
  const train::EvalSettings one{1, o.batch_size, o.seq_len, &bytes};
  const train::EvalResult all = train::evaluate_batches(
      *t.model, [&](int64_t) { return full; }, one);
  const train::EvalResult some = train::evaluate_batches(
      *t.model, [&](int64_t) { return half; }, one);
  CHECK(some.tokens == all.tokens / 2);
  CHECK(some.bytes < all.bytes);
}

TEST_CASE(
    "mlm: batches are masked from the counter-based seeds, evaluation adds accuracy, no samples") {
  TinySetup setup;
  const auto folder = train::testing::fresh_folder("objective_mlm");
  train::testing::write_tiny_corpus(folder);
  const config::ResolvedConfig c = setup.config(train::testing::tiny_config_text(folder), kMlm);
  const train::TrainOptions o = train::train_options_from_config(c);
  train::TrainingData data = train::prepare_training_data(c, setup.registry, setup.lookup);
  const auto objective = train::make_objective(c, o, data.tokenizer);
  const train::MlmObjective mlm = train::mlm_objective_from_config(c, data.tokenizer);
  CHECK(objective->name() == "mlm");
  CHECK_FALSE(objective->makes_samples());
  const train::Batch made = objective->training_batch(
      train::training_windows(data.train, o.seed, 3, 0, o.batch_size, o.seq_len), o.seed, 3, 0);
  const train::Batch before =
      train::mask_batch(train::training_batch(data.train, o.seed, 3, 0, o.batch_size, o.seq_len),
                        mlm, train::mlm_training_seed(o.seed, 3, 0));
  CHECK(made.inputs.to_vector() == before.inputs.to_vector());
  CHECK(made.targets.to_vector() == before.targets.to_vector());

  train::TrainableModel t =
      train::build_trainable_model(c, setup.registry, setup.lookup, data.tokenizer.vocab_size());
  const train::TokenBytes bytes = train::token_bytes(data.tokenizer);
  const train::EvalSettings settings{2, o.batch_size, o.seq_len, &bytes};
  const train::ObjectiveEvaluation seam = objective->evaluate(
      *t.model,
      [&](int64_t i) { return train::validation_windows(data.val, i, 2, o.batch_size, o.seq_len); },
      settings);
  const train::MlmEvalResult direct = train::evaluate_mlm(*t.model, data.val, settings, mlm);
  CHECK(seam.eval.loss == direct.eval.loss);
  CHECK(seam.eval.tokens == direct.eval.tokens);
  CHECK(seam.extra.at("val_accuracy").get<double>() == direct.accuracy);
  CHECK(seam.extra.at("objective").get<std::string>() == "mlm");
  CHECK(seam.summary.find("masked-token accuracy") != std::string::npos);
}
