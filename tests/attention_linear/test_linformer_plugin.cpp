// attention_linformer loaded as its real .so: with k = n and E = F = identity it equals the
// dense plugin's bidirectional attention on the same weights; shorter inputs use the first T
// columns of E and F (checked against the formula written here); the sharing modes' parameters
// and refusals; the causal language model's refusal naming the layer and saying why; the SDK
// attention conformance kit (bidirectional).
#include <doctest/doctest.h>

#include <cmath>
#include <cstring>
#include <string>
#include <vector>

#include "common/error.hpp"
#include "engine/autograd.hpp"
#include "engine/ops.hpp"
#include "linear_fixture.hpp"
#include "model/language_model.hpp"

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

bool has_parameter(const rt::AttentionHandle& attn, const std::string& name) {
  for (const auto& p : attn.parameters())
    if (p.name == name) return true;
  return false;
}

void overwrite(eng::Tensor target, const std::vector<float>& values) {
  REQUIRE(static_cast<size_t>(target.numel()) == values.size());
  std::memcpy(target.data<float>(), values.data(), values.size() * sizeof(float));
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

rt::AttentionHandle linformer_handle(int64_t k, const std::string& sharing) {
  return linear_test::handle("linformer", [=](rt::ComponentConfig& c) {
    c.set_int("k", k);
    c.set_string("sharing", sharing);
  });
}

pb_layer_context encoder_context(int64_t d_model, int64_t heads, int64_t n) {
  return layer_context(d_model, heads, n, false);
}

}  // namespace

TEST_CASE("linformer with k = n and E = F = identity equals dense bidirectional attention") {
  const int64_t n = 12, c = 16, heads = 2;
  for (const std::string sharing : {"none", "headwise", "kv"}) {
    CAPTURE(sharing);
    rt::AttentionHandle lin = linformer_handle(n, sharing);
    lin.init(encoder_context(c, heads, n));
    rt::AttentionHandle dense = linear_test::handle(
        "dense", [](rt::ComponentConfig& cfg) { cfg.set_bool("causal", false); });
    dense.init(encoder_context(c, heads, n));
    for (const char* name : {"qkv.weight", "qkv.bias", "proj.weight", "proj.bias"})
      overwrite(parameter(dense, name), parameter(lin, name).to_vector());
    for (const char* name : {"proj_e", "proj_f"}) {
      if (!has_parameter(lin, name)) continue;
      eng::Tensor p = parameter(lin, name);
      std::vector<float> identity(static_cast<size_t>(p.numel()), 0.f);
      for (size_t base = 0; base < identity.size(); base += static_cast<size_t>(n * n))
        for (int64_t i = 0; i < n; ++i) identity[base + static_cast<size_t>(i * n + i)] = 1.f;
      overwrite(p, identity);
    }
    eng::NoGradGuard no_grad;
    eng::Tensor x = random_input({2, n, c}, 5);
    CHECK(max_abs_diff(lin.forward(x, false), dense.forward(x, false)) < 1e-5);
  }
}

TEST_CASE("linformer: inputs shorter than n use the first T columns of E and F") {
  const int64_t n = 16, k = 5, c = 16, heads = 2, t = 9;
  rt::AttentionHandle lin = linformer_handle(k, "none");
  lin.init(encoder_context(c, heads, n));
  eng::NoGradGuard no_grad;
  eng::Tensor x = random_input({1, t, c}, 8);
  // The formula: softmax(Q (E_h[:, :T] K)^T / sqrt(Dh)) (F_h[:, :T] V), per head.
  eng::Tensor qkv =
      eng::matmul(x, parameter(lin, "qkv.weight"), false, true) + parameter(lin, "qkv.bias");
  auto split = [&](int64_t which) {
    return qkv.slice(2, which * c, (which + 1) * c)
        .reshape({1, t, heads, c / heads})
        .permute({0, 2, 1, 3})
        .contiguous();
  };
  eng::Tensor e = parameter(lin, "proj_e").slice(2, 0, t).contiguous();  // [H, k, T]
  eng::Tensor f = parameter(lin, "proj_f").slice(2, 0, t).contiguous();
  eng::Tensor ks = eng::matmul(e, split(1)), vs = eng::matmul(f, split(2));  // [1, H, k, Dh]
  eng::Tensor scores =
      eng::mul_scalar(eng::matmul(split(0), ks, false, true), 1.0 / std::sqrt(c / heads));
  eng::Tensor o = eng::matmul(eng::softmax(scores), vs).permute({0, 2, 1, 3}).reshape({1, t, c});
  eng::Tensor expected =
      eng::matmul(o, parameter(lin, "proj.weight"), false, true) + parameter(lin, "proj.bias");
  CHECK(max_abs_diff(lin.forward(x, false), expected) < 1e-5);
  // Longer than n is refused.
  CHECK_THROWS_WITH_AS(lin.forward(random_input({1, n + 1, c}, 1), false),
                       doctest::Contains("exceeds the projection length n"), patchbay::Error);
}

TEST_CASE("linformer sharing modes: parameters and refusals") {
  rt::AttentionHandle none = linformer_handle(4, "none");
  none.init(encoder_context(16, 2, 8));
  CHECK(parameter(none, "proj_e").shape() == eng::Shape{2, 4, 8});
  CHECK(parameter(none, "proj_f").shape() == eng::Shape{2, 4, 8});
  rt::AttentionHandle headwise = linformer_handle(4, "headwise");
  headwise.init(encoder_context(16, 2, 8));
  CHECK(parameter(headwise, "proj_e").shape() == eng::Shape{4, 8});
  CHECK(has_parameter(headwise, "proj_f"));
  rt::AttentionHandle kv = linformer_handle(4, "kv");
  kv.init(encoder_context(16, 2, 8));
  CHECK(parameter(kv, "proj_e").shape() == eng::Shape{4, 8});
  CHECK_FALSE(has_parameter(kv, "proj_f"));
  CHECK_THROWS_WITH_AS(linformer_handle(4, "layerwise"), doctest::Contains("layerwise"),
                       patchbay::Error);
  CHECK_THROWS_WITH_AS(linformer_handle(4, "rowwise"), doctest::Contains("\"rowwise\""),
                       patchbay::Error);
  rt::AttentionHandle too_many = linformer_handle(9, "headwise");
  CHECK_THROWS_WITH_AS(too_many.init(encoder_context(16, 2, 8)),
                       doctest::Contains("k = 9 exceeds the projection length n"), patchbay::Error);
}

TEST_CASE("a causal language model refuses linformer, naming it and saying why") {
  patchbay::model::ModelOptions o;
  o.vocab_size = 11;
  o.context_length = 8;
  o.n_layers = 2;
  o.n_heads = 2;
  o.d_model = 16;
  o.d_ff = 64;
  o.attention_kinds = {"linformer"};
  patchbay::model::ComponentTables tables;
  std::string message;
  try {
    patchbay::model::LanguageModel::build(o, tables, linear_test::registry());
  } catch (const patchbay::Error& e) {
    message = e.what();
  }
  CHECK(message.find("attention 'linformer'") != std::string::npos);
  CHECK(message.find("cannot be used in a causal language model") != std::string::npos);
  CHECK(message.find("future tokens would leak") != std::string::npos);
  // The layer itself refuses a causal context too (the SDK adapter's message).
  rt::AttentionHandle lin = linformer_handle(4, "headwise");
  CHECK_THROWS_WITH_AS(lin.init(layer_context(16, 2, 8, true)),
                       doctest::Contains("cannot be causal"), patchbay::Error);
}

TEST_CASE("attention 'linformer' passes the attention conformance kit (bidirectional)") {
  pt::AttentionConformanceOptions options;  // grad check runs at max_seq_len 4: k <= 4
  options.causality_tolerance = 0.0;        // bit for bit (issue 39: batch invariance)
  for (const char* sharing : {"none", "kv"})
    pt::check_attention_conformance(linear_test::factory("linformer",
                                                         [sharing](rt::ComponentConfig& cfg) {
                                                           cfg.set_int("k", 3);
                                                           cfg.set_string("sharing", sharing);
                                                         }),
                                    options);
}
