// attention_performer loaded as its real .so: the forward against the unstabilised FAVOR+
// formula written here with engine ops from the layer's own features (so the stabilisers are
// shown to cancel), causal and bidirectional; recurrent decoding equal to the full forward
// over 520 steps; features redrawn only by training forwards, on schedule and
// deterministically; a causal-leak test; under bf16 autocast within bf16 precision of f32 and
// still causal; and the SDK attention conformance kit with the features declared non-trainable.
#include <doctest/doctest.h>

#include <cmath>
#include <string>
#include <vector>

#include "common/error.hpp"
#include "engine/autocast.hpp"
#include "engine/autograd.hpp"
#include "engine/ops.hpp"
#include "linear_fixture.hpp"

namespace {

namespace eng = patchbay::engine;
namespace rt = patchbay::runtime;
namespace pt = patchbay::testing;
using linear_test::layer_context;

eng::Tensor parameter(const rt::AttentionHandle& attn, const std::string& name) {
  for (const auto& p : attn.parameters())
    if (p.name == name) return p.tensor;
  FAIL("no parameter " << name);
  return {};
}

// phi(x) = exp(omega xs - |xs|^2 / 2) with xs = x Dh^(-1/4), no stabiliser, no 1/sqrt(m).
eng::Tensor positive_features(const eng::Tensor& x, const eng::Tensor& omega) {
  const double pre = std::pow(static_cast<double>(x.size(-1)), -0.25);
  eng::Tensor xs = eng::mul_scalar(x, pre);
  eng::Tensor sq = eng::mul_scalar(eng::sum(xs * xs, {3}, true), -0.5);
  return eng::exp(eng::matmul(xs, omega, false, true) + sq);
}

eng::Tensor naive_performer(const rt::AttentionHandle& attn, const eng::Tensor& x, int64_t heads,
                            bool causal) {
  const int64_t b = x.size(0), t = x.size(1), c = x.size(2), dh = c / heads;
  eng::Tensor qkv =
      eng::matmul(x, parameter(attn, "qkv.weight"), false, true) + parameter(attn, "qkv.bias");
  auto split = [&](int64_t which) {
    return qkv.slice(2, which * c, (which + 1) * c)
        .reshape({b, t, heads, dh})
        .permute({0, 2, 1, 3})
        .contiguous();
  };
  const eng::Tensor omega = parameter(attn, "features.omega");
  eng::Tensor a = eng::matmul(positive_features(split(0), omega),
                              positive_features(split(1), omega), false, true);  // [B,H,T,T]
  if (causal) {
    std::vector<float> lower(static_cast<size_t>(t * t));
    for (int64_t i = 0; i < t; ++i)
      for (int64_t j = 0; j < t; ++j) lower[static_cast<size_t>(i * t + j)] = j <= i ? 1.f : 0.f;
    a = a * eng::Tensor::from_vector(lower, {t, t});
  }
  eng::Tensor o = eng::matmul(a, split(2)) / eng::sum(a, {3}, true);
  eng::Tensor merged = o.permute({0, 2, 1, 3}).reshape({b, t, c});
  return eng::matmul(merged, parameter(attn, "proj.weight"), false, true) +
         parameter(attn, "proj.bias");
}

double max_abs_diff(const eng::Tensor& a, const eng::Tensor& b) {
  std::vector<float> x = a.to_vector(), y = b.to_vector();
  REQUIRE(x.size() == y.size());
  double worst = 0;
  for (size_t i = 0; i < x.size(); ++i)
    worst = std::max(worst, std::fabs(static_cast<double>(x[i]) - y[i]));
  return worst;
}

eng::Tensor random_input(const eng::Shape& shape, uint64_t seed) {
  eng::Generator gen(seed);
  return eng::uniform(shape, gen, -1.0, 1.0);
}

rt::AttentionHandle performer_handle(bool causal, int64_t features = 0, int64_t interval = 1000) {
  return linear_test::handle("performer", [=](rt::ComponentConfig& c) {
    c.set_bool("causal", causal);
    c.set_int("nb_features", features);
    c.set_int("redraw_interval", interval);
  });
}

}  // namespace

TEST_CASE("performer forward equals the unstabilised FAVOR+ formula, causal and bidirectional") {
  for (bool causal : {true, false}) {
    for (int64_t t : {1, 6, 33}) {
      CAPTURE(causal);
      CAPTURE(t);
      rt::AttentionHandle attn = performer_handle(causal);
      attn.init(layer_context(32, 2, 64, causal));
      CHECK(parameter(attn, "features.omega").shape() == eng::Shape{44, 16});  // floor(16 ln 16)
      eng::NoGradGuard no_grad;
      eng::Tensor x = random_input({2, t, 32}, 4 + static_cast<uint64_t>(t));
      eng::Tensor y = attn.forward(x, false);
      CHECK(max_abs_diff(y, naive_performer(attn, x, 2, causal)) < 1e-4);
      if (t > 1) CHECK(max_abs_diff(y, naive_performer(attn, x, 2, !causal)) > 1e-3);
    }
  }
}

TEST_CASE("performer recurrent decoding equals the full forward over 520 steps") {
  const int64_t t = 520;
  rt::AttentionHandle attn = performer_handle(true, 24);
  attn.init(layer_context(16, 2, t, true));
  eng::NoGradGuard no_grad;
  eng::Tensor x = random_input({1, t, 16}, 23);
  eng::Tensor full = attn.forward(x, false);
  rt::AttentionHandle::State state = attn.state_create(1, t);
  double worst = 0;
  for (int64_t i = 0; i < t; ++i)
    worst = std::max(worst, max_abs_diff(attn.forward_step(state, x.slice(1, i, i + 1)),
                                         full.slice(1, i, i + 1).contiguous()));
  CHECK(state.length() == t);
  CHECK(worst < 1e-4);
}

TEST_CASE("performer redraws its features only in training, every redraw_interval forwards") {
  rt::AttentionHandle attn = performer_handle(true, 20, 2);
  attn.init(layer_context(16, 2, 8, true));
  eng::Tensor omega = parameter(attn, "features.omega");
  const std::vector<float> initial = omega.to_vector();
  eng::Tensor x = random_input({1, 8, 16}, 3);
  eng::NoGradGuard no_grad;
  for (int i = 0; i < 5; ++i) attn.forward(x, false);
  CHECK(omega.to_vector() == initial);  // evaluation never redraws
  rt::AttentionHandle::State state = attn.state_create(1, 8);
  attn.forward_step(state, x.slice(1, 0, 3));
  CHECK(omega.to_vector() == initial);  // neither does decoding
  attn.forward(x, true);
  attn.forward(x, true);
  CHECK(omega.to_vector() == initial);  // training forwards 0 and 1: draw 0
  attn.forward(x, true);
  const std::vector<float> second = omega.to_vector();
  CHECK(second != initial);  // training forward 2: draw 1
  // Deterministic from the seed and the count: a twin layer redraws the same features.
  rt::AttentionHandle twin = performer_handle(true, 20, 2);
  twin.init(layer_context(16, 2, 8, true));
  for (int i = 0; i < 3; ++i) twin.forward(x, true);
  CHECK(parameter(twin, "features.omega").to_vector() == second);
  // Evaluation after training uses the latest features: equal to the formula with them.
  CHECK(max_abs_diff(attn.forward(x, false), naive_performer(attn, x, 2, true)) < 1e-4);
  // The features are state, not trained.
  CHECK_FALSE(omega.requires_grad());
  // So is the count of training forwards (checkpointed beside omega): a layer given attn's count
  // and features, as a checkpoint restore writes them in place, redraws when attn does.
  const eng::Tensor count = parameter(attn, "features.training_forwards");
  CHECK(count.to_vector() == std::vector<float>{0.f, 3.f});
  CHECK_FALSE(count.requires_grad());
  rt::AttentionHandle restored = performer_handle(true, 20, 2);
  restored.init(layer_context(16, 2, 8, true));
  eng::Tensor restored_count = parameter(restored, "features.training_forwards");
  eng::Tensor restored_omega = parameter(restored, "features.omega");
  eng::copy_(restored_count, count);
  eng::copy_(restored_omega, omega);
  for (int i = 0; i < 2; ++i) {  // training forwards 3 (draw 1) and 4 (draw 2)
    attn.forward(x, true);
    restored.forward(x, true);
    CHECK(restored_omega.to_vector() == omega.to_vector());
  }
  CHECK(omega.to_vector() != second);
}

TEST_CASE("performer: a restore that rewinds the count redraws even when the draw index repeats") {
  // Layer a ran 6 training forwards (last draw 2); b ran 4 (its features are draw 1). Restoring
  // b's count and features into a (as a resume whose replay ran further than the checkpoint
  // does) must leave a on draw 2 at its next forward, as a layer that ran 5 forwards is —
  // although a's own last draw index is 2 as well.
  rt::AttentionHandle a = performer_handle(true, 20, 2), b = performer_handle(true, 20, 2),
                      straight = performer_handle(true, 20, 2);
  for (rt::AttentionHandle* layer : {&a, &b, &straight}) layer->init(layer_context(16, 2, 8, true));
  eng::Tensor x = random_input({1, 8, 16}, 5);
  eng::NoGradGuard no_grad;
  for (int i = 0; i < 6; ++i) a.forward(x, true);
  for (int i = 0; i < 4; ++i) b.forward(x, true);
  for (int i = 0; i < 5; ++i) straight.forward(x, true);
  eng::Tensor a_count = parameter(a, "features.training_forwards");
  eng::Tensor a_omega = parameter(a, "features.omega");
  eng::copy_(a_count, parameter(b, "features.training_forwards"));
  eng::copy_(a_omega, parameter(b, "features.omega"));
  a.forward(x, true);  // forward index 4: draw 2
  CHECK(a_omega.to_vector() == parameter(straight, "features.omega").to_vector());
  CHECK(a_count.to_vector() == std::vector<float>{0.f, 5.f});
}

TEST_CASE("performer: perturbing the future never changes the past (causal-leak test, T = 64)") {
  // Large inputs make the keys' feature magnitudes differ widely, where a whole-sequence key
  // stabiliser (lucidrains #82) would let later keys change earlier outputs.
  const int64_t t = 64;
  rt::AttentionHandle attn = performer_handle(true, 32);
  attn.init(layer_context(16, 2, t, true));
  eng::NoGradGuard no_grad;
  eng::Tensor x = eng::mul_scalar(random_input({1, t, 16}, 41), 3.0);
  eng::Tensor y = attn.forward(x, false);
  for (int64_t cut : {0, 20, 62}) {
    CAPTURE(cut);
    std::vector<float> values = x.to_vector();
    for (size_t i = static_cast<size_t>((cut + 1) * 16); i < values.size(); ++i)
      values[i] = values[i] * 4.f + 1.f;
    eng::Tensor y2 = attn.forward(eng::Tensor::from_vector(values, {1, t, 16}), false);
    CHECK(max_abs_diff(y.slice(1, 0, cut + 1).contiguous(), y2.slice(1, 0, cut + 1).contiguous()) ==
          0.0);
    CHECK(max_abs_diff(y.slice(1, cut + 1, t).contiguous(), y2.slice(1, cut + 1, t).contiguous()) >
          1e-3);
  }
}

TEST_CASE("performer under bf16 autocast: bf16 precision of f32, gradients too, still causal") {
  // [train] precision = "bf16": the projections are bf16 GEMMs and the causal kernel takes bf16
  // operands (the engine op reads the thread's policy through the ops table). The result moves
  // by bf16 rounding, not more, and perturbing the future still leaves the past's bits alone.
  const int64_t t = 48;
  rt::AttentionHandle attn = performer_handle(true, 32);
  attn.init(layer_context(16, 2, t, true));
  const eng::Tensor w = random_input({1, t, 16}, 43);
  auto run = [&](const std::vector<float>& values, bool bf16) {
    eng::Tensor x = eng::Tensor::from_vector(values, {1, t, 16});
    x.set_requires_grad(true);
    eng::AutocastGuard policy(bf16 ? eng::DType::kBF16 : eng::DType::kF32);
    eng::Tensor y = attn.forward(x, false);
    eng::backward(eng::sum(eng::mul(y, w)));
    return std::pair<eng::Tensor, eng::Tensor>{y.detach(), x.grad()};
  };
  const std::vector<float> values = random_input({1, t, 16}, 42).to_vector();
  const auto [y32, g32] = run(values, false);
  const auto [y16, g16] = run(values, true);
  const double y_scale = std::max(1e-3, max_abs_diff(y32, eng::zeros_like(y32)));
  const double g_scale = std::max(1e-3, max_abs_diff(g32, eng::zeros_like(g32)));
  CHECK(max_abs_diff(y16, y32) <= 3e-2 * y_scale);
  CHECK(max_abs_diff(y16, y32) > 1e-5 * y_scale);  // rounded: not the f32 result
  CHECK(max_abs_diff(g16, g32) <= 3e-2 * g_scale);
  std::vector<float> later = values;
  for (size_t i = static_cast<size_t>(21 * 16); i < later.size(); ++i) later[i] = -later[i] + 0.5f;
  const eng::Tensor y16_later = run(later, true).first;
  CHECK(max_abs_diff(y16.slice(1, 0, 21).contiguous(), y16_later.slice(1, 0, 21).contiguous()) ==
        0.0);
}

TEST_CASE("attention 'performer' passes the attention conformance kit") {
  pt::AttentionConformanceOptions options;
  options.causality_tolerance = 0.0;  // bit for bit (issue 39: batch invariance)
  options.non_trainable_parameters = {"features.omega", "features.training_forwards"};
  pt::check_attention_conformance(linear_test::factory("performer", [](rt::ComponentConfig&) {}),
                                  options);
}
