// Packed sequences through the whole model (LanguageModel::forward_packed, attention 'dense'
// with PB_ATTENTION_CAP_PACKED): a batch whose rows hold several examples gives each example
// exactly the loss it gets alone (per-token losses summed per example), and the parameters'
// gradients equal the sum of the examples' separate runs, within f32 tolerance; for learned,
// sinusoidal, rotary and ALiBi positions (positions restart per example). A layer without the
// capability makes a packed run refuse, naming the kind; bad segment ids are refused.
#include <algorithm>
#include <cmath>
#include <map>
#include <string>
#include <vector>

#include "common/error.hpp"
#include "engine/autograd.hpp"
#include "engine/ops.hpp"
#include "model_fixture.hpp"

namespace eng = patchbay::engine;
namespace pm = patchbay::model;

namespace {

constexpr int64_t kIgnore = -100;

struct Example {
  std::vector<int64_t> tokens;  // inputs; targets are tokens shifted by one within the example
};

// Targets of an example alone: next token inside it, ignore at its last position (no next
// token of its own), so the packed and the separate runs score the same predictions.
std::vector<int64_t> targets_of(const Example& e) {
  std::vector<int64_t> t(e.tokens.begin() + 1, e.tokens.end());
  t.push_back(kIgnore);
  return t;
}

eng::Tensor i64(const std::vector<int64_t>& values, int64_t rows) {
  return eng::Tensor::from_data(values.data(), {rows, static_cast<int64_t>(values.size()) / rows},
                                eng::DType::kI64);
}

// Sum of per-token losses of logits [1 or B, T, V] rows [begin, begin + len) of row `row`.
double loss_sum(const eng::Tensor& logits, const eng::Tensor& targets, int64_t row, int64_t begin,
                int64_t len) {
  eng::CrossEntropyOptions sum;
  sum.reduction = eng::LossReduction::kSum;
  const int64_t vocab = logits.size(2);
  const eng::Tensor l = eng::reshape(
      eng::narrow(eng::narrow(logits, 0, row, 1), 1, begin, len).contiguous(), {len, vocab});
  const eng::Tensor t =
      eng::reshape(eng::narrow(eng::narrow(targets, 0, row, 1), 1, begin, len).contiguous(), {len});
  return eng::cross_entropy(l, t, sum).item();
}

std::map<std::string, std::vector<float>> gradients(pm::LanguageModel& model) {
  std::map<std::string, std::vector<float>> out;
  for (const pm::NamedParameter& p : model.parameters()) {
    REQUIRE_MESSAGE(p.tensor.grad().defined(), p.name);
    out[p.name] = p.tensor.grad().to_vector();
  }
  return out;
}

void zero_gradients(pm::LanguageModel& model) {
  for (const pm::NamedParameter& p : model.parameters()) {
    eng::Tensor t = p.tensor;
    t.zero_grad();
  }
}

void check_packed_equals_separate(const pm::ModelOptions& options) {
  auto model = pm::LanguageModel::build(options, {}, model_test::registry());
  // Two rows of T = 16: three examples (5, 7, 4 tokens), then two (9, 7).
  const std::vector<std::vector<Example>> rows = {
      {{{1, 4, 2, 7, 9}}, {{3, 0, 5, 10, 6, 8, 2}}, {{7, 7, 1, 4}}},
      {{{2, 9, 3, 3, 6, 0, 1, 5, 8}}, {{10, 4, 6, 2, 9, 1, 3}}}};
  const int64_t t = 16;
  std::vector<int64_t> tokens, targets, segments;
  for (const auto& row : rows) {
    int64_t id = 0;
    for (const Example& e : row) {
      tokens.insert(tokens.end(), e.tokens.begin(), e.tokens.end());
      const std::vector<int64_t> target = targets_of(e);
      targets.insert(targets.end(), target.begin(), target.end());
      segments.insert(segments.end(), e.tokens.size(), id++);
    }
  }
  REQUIRE(static_cast<int64_t>(tokens.size()) == 2 * t);

  // Packed: one forward and one backward of the summed loss.
  const eng::Tensor packed_targets = i64(targets, 2);
  const eng::Tensor logits = model->forward_packed(i64(tokens, 2), i64(segments, 2), false).logits;
  eng::CrossEntropyOptions sum;
  sum.reduction = eng::LossReduction::kSum;
  eng::backward(eng::cross_entropy(eng::reshape(logits, {-1, options.vocab_size}),
                                   eng::reshape(packed_targets, {-1}), sum));
  const std::map<std::string, std::vector<float>> packed_grads = gradients(*model);

  // Separately: each example alone, gradients summed.
  std::map<std::string, std::vector<float>> separate_grads;
  for (size_t r = 0; r < rows.size(); ++r) {
    int64_t begin = 0;
    for (const Example& e : rows[r]) {
      const int64_t len = static_cast<int64_t>(e.tokens.size());
      CAPTURE(r);
      CAPTURE(begin);
      zero_gradients(*model);
      const eng::Tensor alone_targets = i64(targets_of(e), 1);
      const eng::Tensor alone = model->forward(i64(e.tokens, 1), false).logits;
      eng::backward(eng::cross_entropy(eng::reshape(alone, {-1, options.vocab_size}),
                                       eng::reshape(alone_targets, {-1}), sum));
      const double alone_loss = loss_sum(alone.detach(), alone_targets, 0, 0, len);
      const double packed_loss =
          loss_sum(logits.detach(), packed_targets, static_cast<int64_t>(r), begin, len);
      CHECK(packed_loss == doctest::Approx(alone_loss).epsilon(1e-5));
      // The logits themselves, position by position.
      const std::vector<float> a = alone.to_vector();
      const std::vector<float> p =
          eng::narrow(eng::narrow(logits.detach(), 0, static_cast<int64_t>(r), 1), 1, begin, len)
              .contiguous()
              .to_vector();
      double worst = 0;
      for (size_t i = 0; i < a.size(); ++i) worst = std::max(worst, double(std::fabs(a[i] - p[i])));
      CHECK(worst < 2e-5);
      for (const auto& [name, g] : gradients(*model)) {
        std::vector<float>& total = separate_grads[name];
        total.resize(g.size(), 0.0f);
        for (size_t i = 0; i < g.size(); ++i) total[i] += g[i];
      }
      begin += len;
    }
  }
  for (const auto& [name, packed] : packed_grads) {
    CAPTURE(name);
    const std::vector<float>& separate = separate_grads.at(name);
    REQUIRE(separate.size() == packed.size());
    double scale = 0, worst = 0;
    for (size_t i = 0; i < packed.size(); ++i) {
      scale = std::max(scale, double(std::fabs(separate[i])));
      worst = std::max(worst, double(std::fabs(separate[i] - packed[i])));
    }
    CHECK(scale > 0);                     // the parameter takes part
    CHECK(worst <= 1e-5 * scale + 1e-6);  // f32 rounding of sums in another order
  }
}

}  // namespace

TEST_CASE("packed rows: each example gets its own loss and gradients, learned positions") {
  pm::ModelOptions o = model_test::tiny_options();
  o.context_length = 16;
  check_packed_equals_separate(o);
}

TEST_CASE("packed rows: each example gets its own loss and gradients, rotary, RMSNorm, untied") {
  pm::ModelOptions o = model_test::tiny_options();
  o.context_length = 16;
  o.positional = pm::PositionalKind::kRotary;
  o.norm = pm::NormKind::kRmsNorm;
  o.tie_embeddings = false;
  check_packed_equals_separate(o);
}

TEST_CASE("packed rows: each example gets its own loss and gradients, sinusoidal and ALiBi") {
  for (const pm::PositionalKind kind :
       {pm::PositionalKind::kSinusoidal, pm::PositionalKind::kAlibi}) {
    pm::ModelOptions o = model_test::tiny_options();
    o.context_length = 16;
    o.positional = kind;
    o.pre_norm = false;
    check_packed_equals_separate(o);
  }
}

TEST_CASE("packing: one segment per row equals the plain forward; the segments matter") {
  pm::ModelOptions o = model_test::tiny_options();
  auto model = pm::LanguageModel::build(o, {}, model_test::registry());
  const eng::Tensor tokens = i64({1, 4, 2, 7, 9, 3, 0, 5}, 1);
  eng::NoGradGuard no_grad;
  const std::vector<float> plain = model->forward(tokens, false).logits.to_vector();
  const std::vector<float> one =
      model->forward_packed(tokens, i64({3, 3, 3, 3, 3, 3, 3, 3}, 1), false).logits.to_vector();
  const std::vector<float> two =
      model->forward_packed(tokens, i64({0, 0, 0, 0, 1, 1, 1, 1}, 1), false).logits.to_vector();
  double same = 0, changed = 0;
  for (size_t i = 0; i < plain.size(); ++i)
    same = std::max(same, double(std::fabs(plain[i] - one[i])));
  for (size_t i = plain.size() / 2; i < plain.size(); ++i)
    changed = std::max(changed, double(std::fabs(plain[i] - two[i])));
  CHECK(same < 1e-5);
  CHECK(changed > 1e-3);  // the second half no longer sees the first, and starts at position 0
}

TEST_CASE("packing is refused for a layer without PB_ATTENTION_CAP_PACKED, naming it") {
  pm::ModelOptions o = model_test::tiny_options();
  o.causal = false;  // the test layer is bidirectional-only
  o.attention_kinds = {"bidirectional_test"};
  pm::ComponentTables tables;
  auto model = pm::LanguageModel::build(o, tables, model_test::registry());
  CHECK_THROWS_WITH_AS(model->require_packing(),
                       doctest::Contains("attention 'bidirectional_test'"), patchbay::Error);
  CHECK_THROWS_WITH_AS(model->require_packing(), doctest::Contains("PB_ATTENTION_CAP_PACKED"),
                       patchbay::Error);
  const eng::Tensor tokens = i64({1, 4, 2, 7}, 1);
  CHECK_THROWS_WITH_AS(model->forward_packed(tokens, i64({0, 0, 1, 1}, 1), false),
                       doctest::Contains("cannot run packed sequences"), patchbay::Error);
}

TEST_CASE("bad segment ids are refused with a message") {
  pm::ModelOptions o = model_test::tiny_options();
  auto model = pm::LanguageModel::build(o, {}, model_test::registry());
  const eng::Tensor tokens = i64({1, 4, 2, 7}, 1);
  CHECK_THROWS_WITH_AS(model->forward_packed(tokens, i64({0, 1, 0, 1}, 1), false),
                       doctest::Contains("non-decreasing"), patchbay::Error);
  CHECK_THROWS_WITH_AS(model->forward_packed(tokens, i64({0, 0, 1}, 1), false),
                       doctest::Contains("segment_ids [B, T]"), patchbay::Error);
}
