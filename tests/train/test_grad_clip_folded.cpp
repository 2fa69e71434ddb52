// Clipping folded into the optimizer's update pass (optimizer.h minor 1, step_scaled): a tiny
// model trained with clipping on through train_step's path (the norm, then the clip factor
// inside the optimizer's loop) ends bit-identical to the path before it (every gradient
// scaled in place first, then step()), for each built-in optimizer. The clip factor is applied
// on every step here (max_norm far below the norms), and resume stays bit-identical
// (test_training_runs.cpp).
#include <doctest/doctest.h>

#include <cstring>
#include <string>

#include "train/grad_clip.hpp"
#include "train/trainer.hpp"
#include "train/training_data.hpp"
#include "train_fixture.hpp"

using namespace patchbay;
using train::testing::TinySetup;

namespace {

struct Run {
  train::TrainableModel model;
  std::vector<double> losses, norms;
};

// `steps` updates of a fresh tiny model on the training batches of `c`; `old_path` routes the
// update through scale_grads + step(), as train_step did before step_scaled.
Run train_tiny(TinySetup& setup, const config::ResolvedConfig& c, bool old_path, int steps) {
  const train::TrainOptions o = train::train_options_from_config(c);
  train::TrainingData data = train::prepare_training_data(c, setup.registry, setup.lookup);
  Run run{
      train::build_trainable_model(c, setup.registry, setup.lookup, data.tokenizer.vocab_size()),
      {},
      {}};
  train::TrainableModel& t = run.model;
  if (old_path) {
    t.optimizer_step = [&t](double lr, double grad_scale) {
      if (grad_scale != 1.0) train::scale_grads(t.parameter_tensors, grad_scale);
      t.optimizer->step(lr);
    };
  }
  for (int64_t step = 0; step < steps; ++step) {
    const train::StepResult r = train::train_step(t, o, step, [&](int64_t micro) {
      return train::training_batch(data.train, o.seed, step, micro, o.batch_size, o.seq_len);
    });
    REQUIRE(r.finite);
    run.losses.push_back(r.loss);
    run.norms.push_back(r.grad_norm);
  }
  return run;
}

}  // namespace

TEST_CASE("clipping folded into the optimizer's pass equals scaling the gradients first") {
  TinySetup setup;
  const auto folder = train::testing::fresh_folder("clip_folded");
  train::testing::write_tiny_corpus(folder);
  for (const std::string kind : {"adamw", "sgd", "lion", "adafactor"}) {
    INFO("optimizer " << kind);
    std::vector<std::string> overrides = {"optimizer.kind=\"" + kind + "\"", "train.grad_clip=0.05",
                                          "train.max_steps=5"};
    if (kind == "sgd") overrides.push_back("optimizer.sgd.momentum=0.9");
    const config::ResolvedConfig c =
        setup.config(train::testing::tiny_config_text(folder), overrides);
    const Run folded = train_tiny(setup, c, /*old_path=*/false, 5);
    const Run scaled_first = train_tiny(setup, c, /*old_path=*/true, 5);
    CHECK(folded.model.optimizer->supports_grad_scale());
    for (double norm : folded.norms) CHECK(norm > 0.05);  // the factor applied on every step
    CHECK(folded.losses == scaled_first.losses);
    CHECK(folded.norms == scaled_first.norms);
    REQUIRE(folded.model.parameters.size() == scaled_first.model.parameters.size());
    for (size_t i = 0; i < folded.model.parameters.size(); ++i) {
      const engine::Tensor& a = folded.model.parameters[i].tensor;
      const engine::Tensor& b = scaled_first.model.parameters[i].tensor;
      INFO("parameter " << folded.model.parameters[i].name);
      REQUIRE(a.nbytes() == b.nbytes());
      CHECK(std::memcmp(a.data_ptr(), b.data_ptr(), a.nbytes()) == 0);
    }
    // The update moved the parameters (the comparison above is not between untouched models).
    CHECK(folded.losses.back() != folded.losses.front());
  }
}
