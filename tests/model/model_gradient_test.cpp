// Whole-model gradients (autograd through engine ops and both plugins) against central
// finite differences of the cross-entropy loss, on a handful of entries of every kind of
// parameter. The model runs in f32: with eps = 1e-2 the finite-difference error (rounding
// ~1e-7 * |loss| / eps plus O(eps^2) truncation) was at most 6e-5 on these entries (gradients
// of 1e-4 .. 2e-1), so |numeric - analytic| <= 1e-4 + 1e-2 * |analytic| catches a wrong or
// missing term while leaving room for that error.
#include <cmath>
#include <map>
#include <string>

#include "engine/ops.hpp"
#include "model_fixture.hpp"

namespace eng = patchbay::engine;
namespace pm = patchbay::model;

namespace {

eng::Tensor ids(const std::vector<int64_t>& values, int64_t batch) {
  return eng::Tensor::from_data(values.data(), {batch, static_cast<int64_t>(values.size()) / batch},
                                eng::DType::kI64);
}

double loss_of(pm::LanguageModel& model, const eng::Tensor& tokens, const eng::Tensor& targets) {
  eng::NoGradGuard no_grad;
  const eng::Tensor logits = model.forward(tokens, false).logits;
  return eng::cross_entropy(eng::reshape(logits, {-1, model.options().vocab_size}),
                            eng::reshape(targets, {-1}))
      .item();
}

void check_gradients(const pm::ModelOptions& options, const std::vector<std::string>& names) {
  auto model = pm::LanguageModel::build(options, {}, model_test::registry());
  const eng::Tensor tokens = ids({1, 4, 2, 7, 9, 3, 0, 5, 10, 6}, 2);
  const eng::Tensor targets = ids({4, 2, 7, 9, 3, 8, 5, 10, 6, 1}, 2);
  const eng::Tensor logits = model->forward(tokens, false).logits;
  eng::backward(eng::cross_entropy(eng::reshape(logits, {-1, options.vocab_size}),
                                   eng::reshape(targets, {-1})));

  std::map<std::string, eng::Tensor> by_name;
  for (const pm::NamedParameter& p : model->parameters()) by_name[p.name] = p.tensor;
  const double eps = 1e-2;
  for (const std::string& name : names) {
    INFO("parameter ", name);
    REQUIRE(by_name.count(name) == 1);
    eng::Tensor param = by_name[name];
    REQUIRE(param.is_contiguous());
    REQUIRE(param.grad().defined());
    const std::vector<float> grad = param.grad().to_vector();
    float* data = param.data<float>();
    const int64_t n = param.numel();
    for (int64_t index : {int64_t{0}, n / 2 + 1, n - 1}) {
      INFO("entry ", index);
      const float saved = data[index];
      data[index] = static_cast<float>(saved + eps);
      const double up = loss_of(*model, tokens, targets);
      data[index] = static_cast<float>(saved - eps);
      const double down = loss_of(*model, tokens, targets);
      data[index] = saved;
      const double numeric = (up - down) / (2 * eps);
      const double analytic = grad[static_cast<size_t>(index)];
      CHECK(std::abs(numeric - analytic) <= 1e-4 + 1e-2 * std::abs(analytic));
    }
  }
}

}  // namespace

TEST_CASE("gradients match finite differences: pre-norm LayerNorm, learned positions, tied head") {
  pm::ModelOptions o = model_test::tiny_options();
  o.context_length = 5;
  check_gradients(
      o, {"wte.weight", "wpe.weight", "blocks.0.norm1.gain", "blocks.0.norm1.bias",
          "blocks.0.attn.qkv.weight", "blocks.1.attn.proj.weight", "blocks.1.ffn.fc.weight",
          "blocks.0.ffn.proj.bias", "norm_f.gain", "norm_f.bias"});
}

TEST_CASE("gradients match finite differences: post-norm RMSNorm, rotary positions, untied head") {
  pm::ModelOptions o = model_test::tiny_options();
  o.context_length = 5;
  o.norm = pm::NormKind::kRmsNorm;
  o.pre_norm = false;
  o.positional = pm::PositionalKind::kRotary;
  o.tie_embeddings = false;
  check_gradients(o, {"wte.weight", "blocks.0.norm1.gain", "blocks.0.attn.qkv.weight",
                      "blocks.1.norm2.gain", "blocks.1.ffn.proj.weight", "head.weight"});
}
