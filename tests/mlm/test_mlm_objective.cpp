// The masked-LM objective through the trainer (core/train/objective_mlm.hpp) on a tiny
// bidirectional character model with the real plugins:
//   - the trainer's loss is the mean cross-entropy over the masked positions only (a known
//     answer computed by hand from the same model's logits; the mean over all positions differs);
//   - masked-token loss and accuracy on a hand-built case;
//   - refusals by message: mlm with a causal model, a bidirectional model with next-token
//     prediction, a mask token the tokenizer lacks, rates adding past 1, a causal-only or
//     causal-configured attention in a bidirectional model, decoding a bidirectional model;
//     Linformer and expert choice still refused in a causal LM;
//   - dense / linear / Performer (causal = false), Linformer and expert-choice routing build a
//     bidirectional model whose first position sees the last token;
//   - a short MLM run lowers the masked-token loss, and a resumed run is bit-identical.
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <functional>
#include <nlohmann/json.hpp>
#include <stdexcept>
#include <string>
#include <vector>

#include "../train/resume_check.hpp"
#include "../train/train_fixture.hpp"
#include "common/error.hpp"
#include "engine/autograd.hpp"
#include "engine/ops.hpp"
#include "run/metrics_log.hpp"
#include "train/checkpoint.hpp"
#include "train/objective_mlm.hpp"
#include "train/trainer.hpp"
#include "train/training_data.hpp"

using namespace patchbay;
using train::testing::TinySetup;

namespace {

// --set overrides that make the tiny config a bidirectional masked-LM (dense, causal = false).
std::vector<std::string> mlm_overrides(std::vector<std::string> extra = {}) {
  std::vector<std::string> o = {"tokenizer.special_tokens=[\"<|endoftext|>\", \"<|mask|>\"]",
                                "model.causal=false", "model.attention.causal=false",
                                "train.objective=\"mlm\""};
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

}  // namespace

TEST_CASE("the MLM training loss is the mean cross-entropy over the masked positions only") {
  TinySetup setup;
  const auto folder = train::testing::fresh_folder("mlm_loss");
  train::testing::write_tiny_corpus(folder);
  const config::ResolvedConfig c =
      setup.config(train::testing::tiny_config_text(folder), mlm_overrides());
  const train::TrainOptions o = train::train_options_from_config(c);
  train::TrainingData data = train::prepare_training_data(c, setup.registry, setup.lookup);
  const train::MlmObjective mlm = train::mlm_objective_from_config(c, data.tokenizer);
  train::TrainableModel t =
      train::build_trainable_model(c, setup.registry, setup.lookup, data.tokenizer.vocab_size());
  const train::Batch window =
      train::training_batch(data.train, o.seed, 0, 0, o.batch_size, o.seq_len);
  const train::Batch batch = train::mask_batch(window, mlm, train::mlm_training_seed(o.seed, 0, 0));

  // By hand, in double, from the model's logits before the update.
  std::vector<float> logits;
  {
    engine::NoGradGuard no_grad;
    logits = t.model->forward(batch.inputs, false).logits.contiguous().to_vector();
  }
  const int64_t vocab = data.tokenizer.vocab_size();
  const int32_t* targets = batch.targets.data<int32_t>();
  const int32_t* original = window.inputs.data<int32_t>();
  double masked_sum = 0, all_sum = 0;
  int64_t masked = 0;
  for (int64_t i = 0; i < batch.targets.numel(); ++i) {
    const float* row = logits.data() + i * vocab;
    double top = row[0], total = 0;
    for (int64_t v = 1; v < vocab; ++v) top = std::max(top, static_cast<double>(row[v]));
    for (int64_t v = 0; v < vocab; ++v) total += std::exp(row[v] - top);
    const double log_z = top + std::log(total);
    all_sum += log_z - row[original[i]];  // as if every position were predicted
    if (targets[i] == -100) continue;
    CHECK(targets[i] == original[i]);
    masked_sum += log_z - row[targets[i]];
    ++masked;
  }
  REQUIRE(masked > 0);
  REQUIRE(masked < batch.targets.numel());
  const double expected = masked_sum / static_cast<double>(masked);
  const train::StepResult step = train::train_step(t, o, 0, [&](int64_t) { return batch; });
  CHECK(step.loss == doctest::Approx(expected).epsilon(1e-5));
  CHECK(std::fabs(all_sum / static_cast<double>(batch.targets.numel()) - expected) > 1e-3);
  // The mask token replaced some inputs, never a special token was selected.
  int64_t shown_as_mask = 0;
  for (int64_t i = 0; i < batch.inputs.numel(); ++i)
    shown_as_mask += batch.inputs.data<int32_t>()[i] == mlm.mask_id;
  CHECK(shown_as_mask > 0);
  CHECK(shown_as_mask <= masked);
}

TEST_CASE("masked-token loss and accuracy on a hand-built case") {
  // 4 rows over 3 classes; row 1 is not masked (its wrong argmax must not count).
  const std::vector<float> z = {0.f, 1.f, 3.f,   // target 2: argmax 2, right
                                5.f, 0.f, 0.f,   // ignored
                                0.f, 2.f, 1.f,   // target 0: argmax 1, wrong
                                1.f, 1.f, 0.f};  // target 1: tie 0/1 -> lowest id 0, wrong
  const std::vector<int32_t> t = {2, -100, 0, 1};
  const engine::Tensor logits = engine::Tensor::from_vector(z, {4, 3});
  const engine::Tensor targets = engine::Tensor::from_data(t.data(), {4}, engine::DType::kI32);
  const train::MaskedScore s = train::score_masked(logits, targets);
  CHECK(s.counted == 3);
  CHECK(s.correct == 1);
  auto nll = [&](int row, int target) {
    double total = 0;
    for (int v = 0; v < 3; ++v)
      total += std::exp(static_cast<double>(z[static_cast<size_t>(row * 3 + v)]));
    return std::log(total) - z[static_cast<size_t>(row * 3 + target)];
  };
  CHECK(s.loss_sum == doctest::Approx(nll(0, 2) + nll(2, 0) + nll(3, 1)).epsilon(1e-6));
}

TEST_CASE("objective and model kind must agree, and the mask token must be a special token") {
  TinySetup setup;
  const auto folder = train::testing::fresh_folder("mlm_refusals");
  train::testing::write_tiny_corpus(folder);
  const std::string text = train::testing::tiny_config_text(folder);
  CHECK(
      error_of([&] {
        setup.config(text, {"train.objective=\"mlm\""});
      }).find("train.objective = \"mlm\" needs a bidirectional model, but model.causal is true") !=
      std::string::npos);
  CHECK(error_of([&] {
          setup.config(text, {"model.causal=false", "model.attention.causal=false"});
        }).find("would read its own targets") != std::string::npos);
  CHECK(
      error_of([&] {
        setup.config(text, mlm_overrides({"train.mlm.mask_rate=0.8", "train.mlm.random_rate=0.3"}));
      }).find("exceeds 1") != std::string::npos);

  // The default [tokenizer] special_tokens lacks "<|mask|>".
  const config::ResolvedConfig no_mask = setup.config(
      text, {"model.causal=false", "model.attention.causal=false", "train.objective=\"mlm\""});
  train::TrainingData data = train::prepare_training_data(no_mask, setup.registry, setup.lookup);
  const std::string message =
      error_of([&] { train::mlm_objective_from_config(no_mask, data.tokenizer); });
  CHECK(message.find("\"<|mask|>\" is not a special token") != std::string::npos);
  CHECK(message.find("special_tokens = [\"<|endoftext|>\", \"<|mask|>\"]") != std::string::npos);
  train::TrainRequest quiet;
  quiet.show_progress = false;
  CHECK(error_of([&] {
          train::train_model(no_mask, setup.registry, setup.lookup, quiet);
        }).find("Add it to [tokenizer] special_tokens") != std::string::npos);
}

TEST_CASE("bidirectional layers build a bidirectional model and stay refused in a causal one") {
  TinySetup setup;
  const auto folder = train::testing::fresh_folder("mlm_layers");
  train::testing::write_tiny_corpus(folder);
  const std::string text = train::testing::tiny_config_text(folder);
  auto build = [&](const std::vector<std::string>& overrides) {
    const config::ResolvedConfig c = setup.config(text, overrides);
    return model::LanguageModel::build(model::model_options_from_config(c, 40),
                                       model::component_tables_from_config(c), setup.registry);
  };
  // First position's logits move when only the last token changes: every layer sees it.
  auto sees_the_end = [](model::LanguageModel& m) {
    engine::NoGradGuard no_grad;
    std::vector<int32_t> a(16, 3), b(16, 3);
    b.back() = 7;
    const auto first = [&](std::vector<int32_t>& ids) {
      return m.forward(engine::Tensor::from_data(ids.data(), {1, 16}, engine::DType::kI32), false)
          .logits.narrow(1, 0, 1)
          .to_vector();
    };
    const std::vector<float> x = first(a), y = first(b);
    double change = 0;
    for (size_t i = 0; i < x.size(); ++i)
      change = std::max(change, static_cast<double>(std::fabs(x[i] - y[i])));
    return change;
  };
  const std::vector<std::vector<std::string>> bidirectional = {
      mlm_overrides({"model.attention.kind=\"dense\""}),
      mlm_overrides({"model.attention.kind=\"linear\""}),
      mlm_overrides({"model.attention.kind=\"performer\""}),
      mlm_overrides({"model.attention.kind=\"linformer\"", "model.attention.k=16"}),
      mlm_overrides({"model.feedforward.kind=\"moe_expert_choice\""}),
  };
  for (std::vector<std::string> overrides : bidirectional) {
    if (std::find(overrides.begin(), overrides.end(), "model.attention.k=16") !=
        overrides.end())  // linformer: no `causal`
      std::erase(overrides, std::string("model.attention.causal=false"));
    INFO(overrides[4]);
    auto m = build(overrides);
    CHECK(sees_the_end(*m) > 1e-6);
    CHECK(error_of([&] { m->start_decoding(1, 8); }).find("this model is bidirectional") !=
          std::string::npos);
  }
  // In a causal LM the same layers keep today's refusals.
  CHECK(error_of([&] {
          build({"model.attention.kind=\"linformer\""});
        }).find("cannot be used in a causal language model") != std::string::npos);
  CHECK(error_of([&] {
          build({"model.feedforward.kind=\"moe_expert_choice\""});
        }).find("cannot be used in a causal language model") != std::string::npos);
  // In a bidirectional model: a causal-only attention, and dense left at causal = true.
  CHECK(
      error_of([&] {
        build({"model.causal=false", "train.objective=\"mlm\"", "model.attention.kind=\"sparse\""});
      }).find("cannot be used in a bidirectional model (model.causal = false)") !=
      std::string::npos);
  CHECK(error_of([&] {
          build({"model.causal=false", "train.objective=\"mlm\""});
        }).find("configured with causal = true but the model is bidirectional") !=
        std::string::npos);
}

TEST_CASE("a short MLM run lowers the masked-token loss and resumes bit-identically") {
  TinySetup setup;
  const auto folder = train::testing::fresh_folder("mlm_run");
  train::testing::write_tiny_corpus(folder);
  train::TrainRequest quiet;
  quiet.show_progress = false;
  quiet.print_samples = false;
  const std::string text = train::testing::tiny_config_text(folder);
  // Rotary positions: with learned absolute positions a model this small sits for hundreds of
  // steps at the unigram plateau (a masked position's own residual holds only the mask token,
  // so everything must come through position-dependent attention); rotary leaves it in ~100.
  const std::vector<std::string> run = {"train.max_steps=300",  "train.eval_every=150",
                                        "train.eval_batches=4", "train.checkpoint_every=0",
                                        "train.lr=0.01",        "train.batch_size=16",
                                        "train.seq_len=32",     "model.positional=\"rotary\""};
  std::vector<std::string> overrides = mlm_overrides(run);
  overrides.push_back("train.out_dir=\"" + (folder / "long").string() + "\"");
  const train::TrainSummary s =
      train::train_model(setup.config(text, overrides), setup.registry, setup.lookup, quiet);
  REQUIRE(s.steps_done == 300);
  std::vector<nlohmann::json> evals, steps;
  for (const nlohmann::json& r : run::read_metrics(folder / "long" / "metrics.jsonl"))
    (r.contains("val_loss") ? evals : steps).push_back(r);
  REQUIRE(evals.size() == 2);
  const double first_loss = steps.front()["loss"].get<double>();
  INFO("first train loss " << first_loss << ", val " << evals[0]["val_loss"] << " -> "
                           << evals[1]["val_loss"] << ", accuracy " << evals[1]["val_accuracy"]);
  CHECK(evals[0]["objective"] == "mlm");
  CHECK(evals[1]["val_loss"].get<double>() < first_loss - 1.0);
  CHECK(evals[1]["val_loss"].get<double>() < evals[0]["val_loss"].get<double>());
  CHECK(evals[1]["val_accuracy"].get<double>() > 0.3);
  CHECK(evals[1]["val_tokens"].get<int64_t>() < 4 * 16 * 32);  // masked targets only
  CHECK(s.last_sample.empty());                                // no samples from an encoder

  // Resume: 6 steps straight against 3 + 3.
  const std::vector<std::string> short_run = {"train.max_steps=6", "train.checkpoint_every=3"};
  train::testing::check_resume_bit_identical(setup, text, mlm_overrides(short_run), folder, quiet);
}
