// Decoding with bf16 weights and the engine paths behind it: matmul's f32 x bf16 mix (equal to
// the f32 product of the widened values, gradients in each operand's dtype), the skinny
// decode path of matmul equal to the oneDNN path, the embedding gathering bf16 rows, and
// LanguageModel::convert_weights_for_inference: what converts, logits equal to an f32 model
// holding the same rounded weights, close to the f32 model's logits, and the same greedy
// tokens wherever the f32 choice is not a near tie.
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <vector>

#include "engine/autograd.hpp"
#include "engine/generator.hpp"
#include "engine/ops.hpp"
#include "engine/ops_indexing.hpp"
#include "model_fixture.hpp"

namespace eng = patchbay::engine;
namespace pm = patchbay::model;

namespace {

float max_abs_diff(const eng::Tensor& a, const eng::Tensor& b) {
  REQUIRE(a.shape() == b.shape());
  const std::vector<float> x = a.to_vector(), y = b.to_vector();
  float worst = 0;
  for (size_t i = 0; i < x.size(); ++i) worst = std::max(worst, std::abs(x[i] - y[i]));
  return worst;
}

float max_abs(const eng::Tensor& a) {
  float worst = 0;
  for (float v : a.to_vector()) worst = std::max(worst, std::abs(v));
  return worst;
}

// bf16 values widened back to f32: what a bf16 weight holds, as f32.
eng::Tensor rounded_to_bf16(const eng::Tensor& x) {
  return x.to(eng::DType::kBF16).to(eng::DType::kF32);
}

pm::ModelOptions small_options() {
  pm::ModelOptions o = model_test::tiny_options();
  o.vocab_size = 37;
  o.context_length = 24;
  o.d_model = 32;
  o.n_heads = 4;
  o.d_ff = 128;
  o.init_std = 0.3;
  return o;
}

// Greedy decoding of `steps` tokens after `prompt`; the logits of each step in `logits`.
std::vector<int32_t> greedy(pm::LanguageModel& model, const std::vector<int32_t>& prompt,
                            int64_t steps, std::vector<std::vector<float>>* logits) {
  pm::DecodeState state = model.start_decoding(1, model.options().context_length);
  eng::Tensor out = model.decode_step(
      state, eng::Tensor::from_data(prompt.data(), {1, static_cast<int64_t>(prompt.size())},
                                    eng::DType::kI32));
  std::vector<float> last =
      eng::narrow(out, 1, static_cast<int64_t>(prompt.size()) - 1, 1).to_vector();
  std::vector<int32_t> tokens;
  for (int64_t s = 0; s < steps; ++s) {
    logits->push_back(last);
    const auto best = std::max_element(last.begin(), last.end()) - last.begin();
    const auto token = static_cast<int32_t>(best);
    tokens.push_back(token);
    last = model.decode_step(state, eng::Tensor::from_data(&token, {1, 1}, eng::DType::kI32))
               .to_vector();
  }
  return tokens;
}

}  // namespace

TEST_CASE("matmul f32 x bf16 is the f32 product of the widened values, any shape") {
  eng::Generator gen(3);
  for (int64_t m : {1, 3, 4, 5, 40}) {
    for (bool transpose_b : {false, true}) {
      const eng::Tensor a = eng::randn({m, 70}, gen);
      const eng::Tensor w = eng::randn(transpose_b ? eng::Shape{50, 70} : eng::Shape{70, 50}, gen)
                                .to(eng::DType::kBF16);
      const eng::Tensor mixed = eng::matmul(a, w, false, transpose_b);
      CHECK(mixed.dtype() == eng::DType::kF32);
      const eng::Tensor reference = eng::matmul(a, w.to(eng::DType::kF32), false, transpose_b);
      // Same values, same f32 arithmetic up to summation order: |x w| ~ 1, k = 70 terms.
      CHECK(max_abs_diff(mixed, reference) < 1e-4f);
      // bf16 on the left works too, and gives f32.
      const eng::Tensor left = eng::matmul(w, a, !transpose_b, true);  // [50, m]
      CHECK(left.dtype() == eng::DType::kF32);
      CHECK(max_abs_diff(left, eng::matmul(w.to(eng::DType::kF32), a, !transpose_b, true)) < 1e-4f);
    }
  }
  CHECK_THROWS_WITH_AS(eng::matmul(eng::zeros({2, 3}), eng::zeros({3, 2}, eng::DType::kF16)),
                       doctest::Contains("share dtype"), patchbay::Error);
}

TEST_CASE("matmul f32 x bf16 gives each operand its gradient in its own dtype") {
  eng::Generator gen(4);
  eng::Tensor a = eng::randn({2, 6}, gen).set_requires_grad(true);
  eng::Tensor w = eng::randn({5, 6}, gen).to(eng::DType::kBF16);
  w.set_requires_grad(true);
  eng::backward(eng::sum(eng::matmul(a, w, false, true)));
  REQUIRE(a.grad().defined());
  REQUIRE(w.grad().defined());
  CHECK(a.grad().dtype() == eng::DType::kF32);
  CHECK(w.grad().dtype() == eng::DType::kBF16);
  // d sum(a W^T) / d a[i][q] = sum_j W[j][q]: exact sums of bf16 values (5 terms).
  const eng::Tensor expected = eng::sum(w.to(eng::DType::kF32), {0}, true).expand({2, 6});
  CHECK(max_abs_diff(a.grad(), expected) < 1e-5f);
}

TEST_CASE("matmul's skinny decode path equals the oneDNN path") {
  eng::Generator gen(5);
  const eng::Tensor weight = eng::randn({300, 96}, gen);  // [n, k], a linear layer's layout
  const eng::Tensor rows = eng::randn({8, 96}, gen);      // 8 rows: oneDNN
  const eng::Tensor all = eng::matmul(rows, weight, false, true);
  for (int64_t m = 1; m <= 4; ++m) {  // <= 4 rows: the skinny kernel
    const eng::Tensor few = eng::matmul(eng::narrow(rows, 0, 0, m), weight, false, true);
    CHECK(max_abs_diff(few, eng::narrow(all, 0, 0, m)) < 1e-4f);
  }
  // [B, 1, k] against one weight folds to B rows (beam search, batched decoding).
  const eng::Tensor batched =
      eng::matmul(eng::narrow(rows, 0, 0, 3).reshape({3, 1, 96}), weight, false, true);
  CHECK(max_abs_diff(batched.reshape({3, 300}), eng::narrow(all, 0, 0, 3)) < 1e-4f);
}

TEST_CASE("embedding gathers rows of a bf16 table exactly, as f32 values of bf16") {
  eng::Generator gen(6);
  const eng::Tensor table = eng::randn({9, 5}, gen).to(eng::DType::kBF16);
  const int32_t ids[] = {8, 0, 3, 3};
  const eng::Tensor got = eng::embedding(table, eng::Tensor::from_data(ids, {4}, eng::DType::kI32));
  CHECK(got.dtype() == eng::DType::kBF16);
  const eng::Tensor want = eng::embedding(table.to(eng::DType::kF32),
                                          eng::Tensor::from_data(ids, {4}, eng::DType::kI32));
  CHECK(max_abs_diff(got, want) == 0.0f);
}

TEST_CASE("convert_weights_for_inference: matrices to bf16, wpe, biases and gains stay f32") {
  auto model = pm::LanguageModel::build(small_options(), {}, model_test::registry());
  CHECK(model->weights_dtype() == eng::DType::kF32);
  model->convert_weights_for_inference(eng::DType::kF32);  // nothing to do
  model->convert_weights_for_inference(eng::DType::kBF16);
  CHECK(model->weights_dtype() == eng::DType::kBF16);
  int matrices = 0;
  for (const pm::NamedParameter& p : model->parameters()) {
    const bool matrix = p.tensor.dim() >= 2 && p.name != "wpe.weight";
    CAPTURE(p.name);
    CHECK(p.tensor.dtype() == (matrix ? eng::DType::kBF16 : eng::DType::kF32));
    if (matrix) {
      ++matrices;
      CHECK_FALSE(p.tensor.requires_grad());
    }
  }
  CHECK(matrices == 1 + 2 * 4);  // wte, and per block qkv, proj, fc, proj
  CHECK_THROWS_WITH_AS(model->convert_weights_for_inference(eng::DType::kF32),
                       doctest::Contains("cannot get their f32 digits back"), patchbay::Error);
  CHECK_THROWS_WITH_AS(model->convert_weights_for_inference(eng::DType::kF16),
                       doctest::Contains("f32 or bf16"), patchbay::Error);
}

TEST_CASE("bf16-weight decoding equals f32 decoding of the same rounded weights") {
  // The only approximation is rounding each weight once: an f32 model holding the rounded
  // values must give the same logits up to f32 summation order.
  auto bf16_model = pm::LanguageModel::build(small_options(), {}, model_test::registry());
  auto rounded = pm::LanguageModel::build(small_options(), {}, model_test::registry());
  bf16_model->convert_weights_for_inference(eng::DType::kBF16);
  {
    eng::NoGradGuard no_grad;
    for (const pm::NamedParameter& p : rounded->parameters()) {
      if (p.tensor.dim() < 2 || p.name == "wpe.weight") continue;
      eng::Tensor target = p.tensor;
      eng::copy_(target, rounded_to_bf16(p.tensor));
    }
  }
  const std::vector<int32_t> prompt = {3, 14, 15, 9, 26, 5};
  std::vector<std::vector<float>> bf16_logits, rounded_logits;
  const std::vector<int32_t> a = greedy(*bf16_model, prompt, 12, &bf16_logits);
  const std::vector<int32_t> b = greedy(*rounded, prompt, 12, &rounded_logits);
  CHECK(a == b);
  for (size_t s = 0; s < a.size(); ++s) {
    for (size_t v = 0; v < bf16_logits[s].size(); ++v)
      REQUIRE(std::abs(bf16_logits[s][v] - rounded_logits[s][v]) < 1e-4f);
  }
}

TEST_CASE("bf16-weight decoding stays close to f32 and picks the same greedy tokens") {
  auto f32_model = pm::LanguageModel::build(small_options(), {}, model_test::registry());
  auto bf16_model = pm::LanguageModel::build(small_options(), {}, model_test::registry());
  bf16_model->convert_weights_for_inference(eng::DType::kBF16);
  const std::vector<int32_t> prompt = {1, 2, 3, 4, 5, 6, 7, 8};
  std::vector<std::vector<float>> f32_logits, bf16_logits;
  // Teacher-forced comparison: both decode the f32 model's greedy tokens.
  const std::vector<int32_t> f32_tokens = greedy(*f32_model, prompt, 14, &f32_logits);
  std::vector<int32_t> bf16_tokens;
  {
    pm::DecodeState state = bf16_model->start_decoding(1, 24);
    eng::Tensor out = bf16_model->decode_step(
        state, eng::Tensor::from_data(prompt.data(), {1, 8}, eng::DType::kI32));
    std::vector<float> last = eng::narrow(out, 1, 7, 1).to_vector();
    for (int32_t token : f32_tokens) {
      bf16_logits.push_back(last);
      bf16_tokens.push_back(
          static_cast<int32_t>(std::max_element(last.begin(), last.end()) - last.begin()));
      last =
          bf16_model->decode_step(state, eng::Tensor::from_data(&token, {1, 1}, eng::DType::kI32))
              .to_vector();
    }
  }
  // Tolerance: every weight moves by at most 2^-9 of itself (round to nearest, 8-bit
  // significand), so each matmul output moves by at most 2^-9 * sum |x w|; through the
  // residual stream the logits move by a small multiple of 2^-9 (0.2%) of their scale. Bound
  // it at 2% of the largest logit: ten times that, and still far below a wrong weight's
  // effect (a logit of this random model spans several units).
  int decided = 0;
  for (size_t s = 0; s < f32_tokens.size(); ++s) {
    const float scale = max_abs(eng::Tensor::from_vector(f32_logits[s], {37}));
    float worst = 0;
    for (size_t v = 0; v < 37; ++v)
      worst = std::max(worst, std::abs(f32_logits[s][v] - bf16_logits[s][v]));
    CAPTURE(s);
    CHECK(worst <= 0.02f * scale);
    CHECK(worst > 0.0f);  // the weights really are rounded
    // The greedy token must agree wherever f32's top two are further apart than twice the
    // largest logit difference (then no perturbation that small can swap them).
    std::vector<float> sorted = f32_logits[s];
    std::sort(sorted.rbegin(), sorted.rend());
    if (sorted[0] - sorted[1] > 2 * worst) {
      ++decided;
      CHECK(bf16_tokens[s] == f32_tokens[s]);
    }
  }
  CHECK(decided >= 10);  // the comparison says something: most steps are clear decisions
}
