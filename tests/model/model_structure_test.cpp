// Structure of the assembled model: norm and position variants build and run, parameter
// names and counts (tiny formula and GPT-2 124M's known 124,439,808), FLOPs per token,
// refusals of non-causal layers, determinism under a seed, dropout only in training.
#include <cmath>
#include <set>
#include <string>

#include "engine/ops.hpp"
#include "model_fixture.hpp"

namespace eng = patchbay::engine;
namespace pm = patchbay::model;

namespace {

eng::Tensor tokens_2x6() {
  const std::vector<int32_t> v = {1, 5, 2, 9, 10, 0, 3, 3, 8, 4, 7, 6};
  return eng::Tensor::from_data(v.data(), {2, 6}, eng::DType::kI32);
}

std::set<std::string> names_of(const pm::LanguageModel& model) {
  std::set<std::string> names;
  for (const pm::NamedParameter& p : model.parameters()) names.insert(p.name);
  return names;
}

// GPT-2 parameter count with learned positions, LayerNorm and the mlp/dense layers (biases).
int64_t gpt_parameter_count(int64_t v, int64_t t, int64_t c, int64_t l, int64_t f, bool tied) {
  const int64_t block = 2 * (2 * c) + (3 * c * c + 3 * c) + (c * c + c) + (c * f + f) + (f * c + c);
  return v * c + t * c + l * block + 2 * c + (tied ? 0 : v * c);
}

}  // namespace

TEST_CASE("norm and position variants build and give finite logits") {
  for (pm::NormKind norm : {pm::NormKind::kLayerNorm, pm::NormKind::kRmsNorm}) {
    for (bool pre : {true, false}) {
      for (pm::PositionalKind pos : {pm::PositionalKind::kLearned, pm::PositionalKind::kSinusoidal,
                                     pm::PositionalKind::kRotary, pm::PositionalKind::kNone}) {
        pm::ModelOptions o = model_test::tiny_options();
        o.norm = norm;
        o.pre_norm = pre;
        o.positional = pos;
        INFO(pm::norm_kind_name(norm), pre ? " pre" : " post", " ", pm::positional_kind_name(pos));
        auto model = pm::LanguageModel::build(o, {}, model_test::registry());
        const pm::ForwardResult r = model->forward(tokens_2x6(), false);
        REQUIRE(r.logits.shape() == eng::Shape{2, 6, 11});
        for (float x : r.logits.to_vector()) REQUIRE(std::isfinite(x));
        CHECK_FALSE(r.aux_loss.defined());  // mlp has no auxiliary loss
        const std::set<std::string> names = names_of(*model);
        CHECK(names.count("blocks.1.norm2.bias") == (norm == pm::NormKind::kLayerNorm ? 1u : 0u));
        CHECK(names.count("wpe.weight") == (pos == pm::PositionalKind::kLearned ? 1u : 0u));
      }
    }
  }
}

TEST_CASE("post-norm differs from pre-norm and RMSNorm from LayerNorm on the same weights' seed") {
  pm::ModelOptions o = model_test::tiny_options();
  auto pre = pm::LanguageModel::build(o, {}, model_test::registry());
  o.pre_norm = false;
  auto post = pm::LanguageModel::build(o, {}, model_test::registry());
  const std::vector<float> a = pre->forward(tokens_2x6(), false).logits.to_vector();
  const std::vector<float> b = post->forward(tokens_2x6(), false).logits.to_vector();
  CHECK(a != b);
}

TEST_CASE("parameter names, order, no_weight_decay flags and counts") {
  pm::ModelOptions o = model_test::tiny_options();
  auto tied = pm::LanguageModel::build(o, {}, model_test::registry());
  const std::vector<pm::NamedParameter> params = tied->parameters();
  REQUIRE(params.size() > 4);
  CHECK(params.front().name == "wte.weight");
  CHECK(params[1].name == "wpe.weight");
  CHECK(params[2].name == "blocks.0.norm1.gain");
  CHECK(params.back().name == "norm_f.bias");
  std::set<std::string> seen;
  for (const pm::NamedParameter& p : params) {
    CHECK(seen.insert(p.name).second);
    CHECK(p.tensor.requires_grad());
    CHECK(p.no_weight_decay == (p.tensor.dim() < 2));
  }
  CHECK(seen.count("blocks.1.attn.qkv.weight") == 1);
  CHECK(seen.count("blocks.1.ffn.fc.weight") == 1);
  CHECK(tied->parameter_count() == gpt_parameter_count(11, 8, 16, 2, 64, true));
  CHECK(tied->parameter_count() == 6896);
  CHECK(tied->parameter_count(true) == 6896 - 11 * 16 - 8 * 16);

  o.tie_embeddings = false;
  auto untied = pm::LanguageModel::build(o, {}, model_test::registry());
  CHECK(untied->parameter_count() == tied->parameter_count() + 11 * 16);
  CHECK(untied->parameters().back().name == "head.weight");
  CHECK(untied->parameter_count(true) == tied->parameter_count(true) + 11 * 16);
}

TEST_CASE("GPT-2 small (124M): 124,439,808 parameters with a tied head; FLOPs per token") {
  // Allocating all 124M parameters takes ~8 s here, so the count is checked in two steps: a
  // model at GPT-2's block width (C 768, 12 heads, d_ff 3072) with 2 blocks and a small vocab
  // matches the formula, which is linear in V, T and L; the formula gives GPT-2's figure.
  pm::ModelOptions o;
  o.vocab_size = 64;
  o.context_length = 32;
  o.n_layers = 2;
  o.n_heads = 12;
  o.d_model = 768;
  o.d_ff = 3072;
  auto model = pm::LanguageModel::build(o, {}, model_test::registry());
  CHECK(model->parameter_count() == gpt_parameter_count(64, 32, 768, 2, 3072, true));
  CHECK(gpt_parameter_count(50257, 1024, 768, 12, 3072, true) == 124439808);
  CHECK(gpt_parameter_count(50257, 1024, 768, 12, 3072, false) == 124439808 + 50257 * 768);
  // 6N + 12 L T C with N = parameters - wte - wpe + V C (the head matmul counts, the lookups
  // do not); for GPT-2 N = 124,439,808 - 1024 * 768, the figure nanoGPT's estimate_mfu uses.
  const double n =
      static_cast<double>(gpt_parameter_count(64, 32, 768, 2, 3072, true)) - 32.0 * 768.0;
  CHECK(model->flops_per_token(32) == doctest::Approx(6 * n + 12.0 * 2 * 32 * 768));
  CHECK(model->describe().find(std::to_string(model->parameter_count())) != std::string::npos);
}

TEST_CASE(
    "a non-causal attention or feed-forward is refused, naming the block, the component and why") {
  pm::ModelOptions o = model_test::tiny_options();
  o.attention_kinds = {"dense", "bidirectional_test"};
  CHECK_THROWS_WITH_AS(pm::LanguageModel::build(o, {}, model_test::registry()),
                       doctest::Contains("block 1 attention 'bidirectional_test'"),
                       patchbay::Error);
  CHECK_THROWS_WITH_AS(pm::LanguageModel::build(o, {}, model_test::registry()),
                       doctest::Contains("future tokens would leak"), patchbay::Error);
  o = model_test::tiny_options();
  o.feedforward_kinds = {"expert_choice_test"};
  CHECK_THROWS_WITH_AS(pm::LanguageModel::build(o, {}, model_test::registry()),
                       doctest::Contains("block 0 feed-forward 'expert_choice_test'"),
                       patchbay::Error);
  CHECK_THROWS_WITH_AS(pm::LanguageModel::build(o, {}, model_test::registry()),
                       doctest::Contains("PB_FEEDFORWARD_CAP_CAUSAL"), patchbay::Error);
  // dense configured bidirectional: the plugin itself refuses the causal context.
  pm::ComponentTables tables;
  tables.attention.insert("causal", false);
  CHECK_THROWS_WITH_AS(
      pm::LanguageModel::build(model_test::tiny_options(), tables, model_test::registry()),
      doctest::Contains("causal = false"), patchbay::Error);
}

TEST_CASE("ALiBi positions build with the dense attention (PB_ATTENTION_CAP_ALIBI)") {
  pm::ModelOptions o = model_test::tiny_options();
  o.positional = pm::PositionalKind::kAlibi;
  auto model = pm::LanguageModel::build(o, {}, model_test::registry());
  const pm::ForwardResult r = model->forward(tokens_2x6(), false);
  for (float x : r.logits.to_vector()) REQUIRE(std::isfinite(x));
  CHECK(names_of(*model).count("wpe.weight") == 0);
}

TEST_CASE("layer tables: unknown keys are refused, known keys reach the component") {
  pm::ComponentTables tables;
  tables.feedforward.insert("activaton", "relu");
  CHECK_THROWS_WITH_AS(
      pm::LanguageModel::build(model_test::tiny_options(), tables, model_test::registry()),
      doctest::Contains("'activaton'"), patchbay::Error);
  pm::ComponentTables swiglu;
  swiglu.feedforward.insert("activation", "swiglu");
  auto model = pm::LanguageModel::build(model_test::tiny_options(), swiglu, model_test::registry());
  CHECK(names_of(*model).count("blocks.0.ffn.gate.weight") == 1);
}

TEST_CASE("equal seeds give equal models, different seeds different ones") {
  pm::ModelOptions o = model_test::tiny_options();
  auto a = pm::LanguageModel::build(o, {}, model_test::registry());
  auto b = pm::LanguageModel::build(o, {}, model_test::registry());
  o.seed = 8;
  auto c = pm::LanguageModel::build(o, {}, model_test::registry());
  const std::vector<pm::NamedParameter> pa = a->parameters(), pb = b->parameters(),
                                        pc = c->parameters();
  REQUIRE(pa.size() == pb.size());
  for (size_t i = 0; i < pa.size(); ++i)
    CHECK(pa[i].tensor.to_vector() == pb[i].tensor.to_vector());
  CHECK(pa[0].tensor.to_vector() != pc[0].tensor.to_vector());  // wte
  CHECK(pa[4].tensor.to_vector() != pc[4].tensor.to_vector());  // blocks.0.attn.qkv.weight
  CHECK(a->forward(tokens_2x6(), false).logits.to_vector() ==
        b->forward(tokens_2x6(), false).logits.to_vector());
}

TEST_CASE("dropout acts in training only") {
  pm::ModelOptions o = model_test::tiny_options();
  o.dropout = 0.5;
  auto model = pm::LanguageModel::build(o, {}, model_test::registry());
  eng::NoGradGuard no_grad;
  const std::vector<float> eval1 = model->forward(tokens_2x6(), false).logits.to_vector();
  const std::vector<float> eval2 = model->forward(tokens_2x6(), false).logits.to_vector();
  const std::vector<float> train = model->forward(tokens_2x6(), true).logits.to_vector();
  CHECK(eval1 == eval2);
  CHECK(train != eval1);
}
