// [train] lr_scale (train/lr_scale.hpp): entries parse or are refused naming the entry; the
// optimizer gets lr_scale = factor for the selected parameters and 1 elsewhere; a pattern that
// selects nothing and a parameter two patterns select are refused; and one plain-SGD step moves a
// scaled parameter exactly `factor` times as far as the same step without the factor, every
// other parameter bit for bit the same.
#include <doctest/doctest.h>

#include <cmath>
#include <string>
#include <vector>

#include "common/error.hpp"
#include "train/checkpoint.hpp"
#include "train/lr_scale.hpp"
#include "train/trainer.hpp"
#include "train_fixture.hpp"

using namespace patchbay;
using train::testing::TinySetup;

namespace {

std::string refusal_of(const std::vector<std::string>& entries) {
  try {
    train::parse_lr_scales(entries);
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

// One plain-SGD step (no momentum, no decay, no clipping) of the tiny model into folder/NAME.
train::Checkpoint one_sgd_step(TinySetup& setup, const std::filesystem::path& folder,
                               const std::string& name, const std::string& lr_scale) {
  const config::ResolvedConfig c = setup.config(
      train::testing::tiny_config_text(folder),
      {"optimizer.kind=\"sgd\"", "train.max_steps=1", "train.warmup_steps=0", "train.grad_clip=0",
       "train.lr_scale=" + lr_scale, "train.out_dir=\"" + (folder / name).string() + "\""});
  train::train_model(c, setup.registry, setup.lookup, train::testing::quiet_request());
  return train::load_checkpoint(folder / name);
}

}  // namespace

TEST_CASE("lr_scale entries: PATTERN=FACTOR, refusals name the entry") {
  const std::vector<train::LrScale> scales =
      train::parse_lr_scales({"*relative_bias=10", "wte=0.5", "blocks.0-1.*=2e-1"});
  REQUIRE(scales.size() == 3);
  CHECK(scales[0].pattern == "*relative_bias");
  CHECK(scales[0].factor == 10.0);
  CHECK(scales[1].factor == 0.5);
  CHECK(scales[2].pattern == "blocks.0-1.*");
  CHECK(scales[2].factor == doctest::Approx(0.2));
  CHECK(train::parse_lr_scales({}).empty());

  CHECK(refusal_of({"wte"}).find("found \"wte\" (no '=')") != std::string::npos);
  CHECK(refusal_of({"=3"}).find("an empty pattern") != std::string::npos);
  CHECK(refusal_of({"wte=ten"}).find("'ten' is not a number") != std::string::npos);
  CHECK(refusal_of({"wte="}).find("'' is not a number") != std::string::npos);
  CHECK(refusal_of({"wte=0"}).find("not a finite number > 0") != std::string::npos);
  CHECK(refusal_of({"wte=-1"}).find("not a finite number > 0") != std::string::npos);
  CHECK(refusal_of({"wte=inf"}).find("not a finite number > 0") != std::string::npos);
  CHECK(refusal_of({"wte=0"}).find("train.freeze") != std::string::npos);
}

TEST_CASE("lr_scale reaches the optimizer's parameters; unmatched and overlapping patterns refused") {
  TinySetup setup;
  const auto folder = train::testing::fresh_folder("lr_scale_groups");
  train::testing::write_tiny_corpus(folder);
  const std::string text = train::testing::tiny_config_text(folder);

  const train::TrainableModel t = train::build_trainable_model(
      setup.config(text, {"train.lr_scale=[\"wte=4\", \"blocks.1.*=0.25\"]"}), setup.registry,
      setup.lookup, 40);
  int scaled = 0;
  for (const runtime::OptimizerHandle::Parameter& p : t.optimizer_parameters) {
    INFO("parameter " << p.name);
    const double expected = p.name == "wte.weight"                ? 4.0
                            : p.name.rfind("blocks.1.", 0) == 0 ? 0.25
                                                                : 1.0;
    CHECK(p.lr_scale == expected);
    scaled += expected != 1.0 ? 1 : 0;
  }
  CHECK(scaled >= 5);
  CHECK(t.optimizer_parameters.size() == t.parameter_tensors.size());

  auto refusal = [&](const std::string& lr_scale) -> std::string {
    try {
      train::build_trainable_model(setup.config(text, {"train.lr_scale=" + lr_scale}),
                                   setup.registry, setup.lookup, 40);
    } catch (const Error& e) {
      return e.what();
    }
    return "";
  };
  const std::string nothing = refusal("[\"encoder.*=2\"]");
  CHECK(nothing.find("train.lr_scale: the pattern 'encoder.*' matches no parameter") !=
        std::string::npos);
  CHECK(nothing.find("wte.weight") != std::string::npos);
  const std::string twice = refusal("[\"blocks.0=2\", \"*.attn.*=3\"]");
  CHECK(twice.find("is selected by both 'blocks.0' and '*.attn.*'") != std::string::npos);
}

TEST_CASE("one SGD step moves a parameter with factor f exactly f times as far") {
  TinySetup setup;
  const auto folder = train::testing::fresh_folder("lr_scale_sgd");
  train::testing::write_tiny_corpus(folder);
  const train::Checkpoint plain = one_sgd_step(setup, folder, "plain", "[]");
  const train::Checkpoint scaled = one_sgd_step(setup, folder, "scaled", "[\"wte=4\"]");
  // The weights before the step: the same seed builds the same model.
  const train::TrainableModel initial = train::build_trainable_model(
      setup.config(train::testing::tiny_config_text(folder)), setup.registry, setup.lookup,
      plain.tensor("wte.weight").size(0));
  int compared = 0;
  for (const model::NamedParameter& p : initial.parameters) {
    INFO("parameter " << p.name);
    const std::vector<float> w0 = p.tensor.to_vector();
    const std::vector<float> a = plain.tensor(p.name).to_vector();
    const std::vector<float> b = scaled.tensor(p.name).to_vector();
    REQUIRE(a.size() == w0.size());
    if (p.name != "wte.weight") {
      CHECK(a == b);
      continue;
    }
    double moved = 0;
    for (size_t i = 0; i < w0.size(); ++i) {
      const double step = static_cast<double>(a[i]) - w0[i];
      const double scaled_step = static_cast<double>(b[i]) - w0[i];
      // w - lr*g rounded to f32 twice: equal to 4x within a few ulps of the weight.
      CHECK(std::abs(scaled_step - 4.0 * step) <= 4e-6 * (std::abs(w0[i]) + 1e-3));
      moved += std::abs(step);
    }
    CHECK(moved > 0);
    ++compared;
  }
  CHECK(compared == 1);
}
