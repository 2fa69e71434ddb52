// The token-embedding scale of [model] embedding_scale: "auto" is sqrt(d_model) with
// sinusoidal positions (Vaswani et al. 2017, section 3.4) and 1 otherwise; "none",
// "sqrt_d_model" and numbers override it; bad values name the key. The scale reaches the
// logits (auto == explicit sqrt(d_model) != 1 for sinusoidal), and ALiBi models decode like
// their full forward.
#include <cmath>
#include <string>

#include "config/config_loader.hpp"
#include "engine/ops.hpp"
#include "model_fixture.hpp"

namespace eng = patchbay::engine;
namespace pm = patchbay::model;
namespace cfg = patchbay::config;

namespace {

eng::Tensor tokens_2x6() {
  const std::vector<int32_t> v = {1, 5, 2, 9, 10, 0, 3, 3, 8, 4, 7, 6};
  return eng::Tensor::from_data(v.data(), {2, 6}, eng::DType::kI32);
}

std::vector<float> logits(const pm::ModelOptions& o) {
  auto model = pm::LanguageModel::build(o, {}, model_test::registry());
  eng::NoGradGuard no_grad;
  return model->forward(tokens_2x6(), false).logits.to_vector();
}

}  // namespace

TEST_CASE("embedding_scale: auto is sqrt(d_model) for sinusoidal positions, 1 otherwise") {
  pm::ModelOptions o = model_test::tiny_options();
  const double root = std::sqrt(static_cast<double>(o.d_model));
  o.positional = pm::PositionalKind::kSinusoidal;
  CHECK(pm::resolved_embedding_scale(o) == root);
  for (pm::PositionalKind kind : {pm::PositionalKind::kLearned, pm::PositionalKind::kRotary,
                                  pm::PositionalKind::kAlibi, pm::PositionalKind::kNone}) {
    o.positional = kind;
    CHECK(pm::resolved_embedding_scale(o) == 1.0);
  }
  CHECK(pm::parse_embedding_scale("auto", 64) == std::nullopt);
  CHECK(pm::parse_embedding_scale("none", 64) == 1.0);
  CHECK(pm::parse_embedding_scale("sqrt_d_model", 64) == 8.0);
  CHECK(pm::parse_embedding_scale("2.5", 64) == 2.5);
  for (const char* bad : {"", "0", "-1", "8x", "sqrt", "nan"})
    CHECK_THROWS_WITH_AS(pm::parse_embedding_scale(bad, 64), doctest::Contains("embedding_scale"),
                         patchbay::Error);
}

TEST_CASE("embedding_scale reaches the logits") {
  pm::ModelOptions o = model_test::tiny_options();
  o.positional = pm::PositionalKind::kSinusoidal;
  const std::vector<float> automatic = logits(o);
  o.embedding_scale = std::sqrt(static_cast<double>(o.d_model));
  CHECK(logits(o) == automatic);
  o.embedding_scale = 1.0;
  const std::vector<float> unscaled = logits(o);
  double diff = 0;
  for (size_t i = 0; i < unscaled.size(); ++i) diff += std::fabs(unscaled[i] - automatic[i]);
  CHECK(diff > 1e-3);
  o.positional = pm::PositionalKind::kLearned;
  o.embedding_scale = std::nullopt;
  const std::vector<float> learned = logits(o);
  o.embedding_scale = 1.0;
  CHECK(logits(o) == learned);  // learned keeps scale 1 by default
}

TEST_CASE("[model] embedding_scale from a config, and a bad value names the key") {
  const cfg::ResolvedConfig config = cfg::load_config_text(
      "[model]\nd_model = 32\nn_heads = 4\nembedding_scale = \"sqrt_d_model\"\n", "scale.toml");
  const pm::ModelOptions o = pm::model_options_from_config(config, 11);
  REQUIRE(o.embedding_scale.has_value());
  CHECK(*o.embedding_scale == doctest::Approx(std::sqrt(32.0)));
  const cfg::ResolvedConfig bad = cfg::load_config_text(
      "[model]\nd_model = 32\nn_heads = 4\nembedding_scale = \"large\"\n", "bad.toml");
  CHECK_THROWS_WITH_AS(pm::model_options_from_config(bad, 11),
                       doctest::Contains("model.embedding_scale"), patchbay::Error);
}

TEST_CASE("KV-cache decoding equals the full forward: ALiBi positions") {
  pm::ModelOptions o = model_test::tiny_options();
  o.positional = pm::PositionalKind::kAlibi;
  auto model = pm::LanguageModel::build(o, {}, model_test::registry());
  const eng::Tensor tokens = tokens_2x6();
  eng::NoGradGuard no_grad;
  const std::vector<float> full = model->forward(tokens, false).logits.to_vector();
  pm::DecodeState state = model->start_decoding(2, 6);
  std::vector<eng::Tensor> pieces = {
      model->decode_step(state, eng::narrow(tokens, 1, 0, 2).contiguous())};
  for (int64_t t = 2; t < 6; ++t)
    pieces.push_back(model->decode_step(state, eng::narrow(tokens, 1, t, 1).contiguous()));
  const std::vector<float> decoded = eng::concat(pieces, 1).to_vector();
  REQUIRE(decoded.size() == full.size());
  float worst = 0;
  for (size_t i = 0; i < full.size(); ++i) worst = std::max(worst, std::fabs(full[i] - decoded[i]));
  CHECK(worst < 1e-4f);
}
