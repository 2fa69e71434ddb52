// Grouped-query attention and LLaMA 3.1 rope scaling in attention_dense: a layer with
// n_kv_heads = Hkv equals the multi-head layer whose key/value heads are the Hkv heads
// repeated (query head h reads head h / (H / Hkv)) — a known answer built by copying weights;
// the SDK conformance kit (causality, decoding == forward, finite-difference gradients) with
// grouped heads; refusals; the llama3 frequencies against values computed independently from
// transformers' formula; and the composed rotary (frequency list) against the host's op.
#include <doctest/doctest.h>

#include <cmath>
#include <string>
#include <vector>

#include "attention_fixture.hpp"
#include "common/error.hpp"
#include "engine/autograd.hpp"
#include "engine/ops.hpp"
#include "rotary_frequencies.hpp"

namespace {

namespace eng = patchbay::engine;
namespace rt = patchbay::runtime;
namespace pt = patchbay::testing;
using attention_test::layer_context;

rt::AttentionHandle dense_with(const std::function<void(rt::ComponentConfig&)>& configure) {
  rt::ComponentConfig config(attention_test::dense_descriptor());
  configure(config);
  return rt::AttentionHandle(
      attention_test::registry().create(PB_KIND_ATTENTION, "dense", config.view()),
      attention_test::registry().host());
}

eng::Tensor parameter(const rt::AttentionHandle& attn, const std::string& name) {
  for (const auto& p : attn.parameters())
    if (p.name == name) return p.tensor;
  FAIL("no parameter " << name);
  return {};
}

void set_parameter(const rt::AttentionHandle& attn, const std::string& name, const eng::Tensor& v) {
  eng::Tensor p = parameter(attn, name);
  eng::copy_(p, v);
}

double max_abs_diff(const eng::Tensor& a, const eng::Tensor& b) {
  std::vector<float> x = a.to_vector(), y = b.to_vector();
  REQUIRE(x.size() == y.size());
  double worst = 0;
  for (size_t i = 0; i < x.size(); ++i)
    worst = std::max(worst, std::fabs(static_cast<double>(x[i]) - y[i]));
  return worst;
}

std::string error_of(const std::function<void()>& call) {
  try {
    call();
  } catch (const patchbay::Error& e) {
    return e.what();
  }
  return "";
}

// The MHA rows of qkv [3C, ...] from GQA rows [C + 2 Hkv Dh, ...]: q as is, k and v head h
// from head h / (H / Hkv). Works for the weight (row = Dh * C floats) and the bias (row = Dh).
std::vector<float> repeat_kv_rows(const std::vector<float>& gqa, int64_t heads, int64_t kv_heads,
                                  int64_t head_dim, int64_t row_width) {
  const int64_t c = heads * head_dim, block = head_dim * row_width;
  std::vector<float> mha(static_cast<size_t>(3 * c * row_width));
  std::copy(gqa.begin(), gqa.begin() + c * row_width, mha.begin());
  for (int64_t part = 0; part < 2; ++part)
    for (int64_t h = 0; h < heads; ++h) {
      const int64_t source =
          c * row_width + part * kv_heads * block + (h / (heads / kv_heads)) * block;
      const int64_t target = (1 + part) * c * row_width + h * block;
      std::copy(gqa.begin() + source, gqa.begin() + source + block, mha.begin() + target);
    }
  return mha;
}

}  // namespace

TEST_CASE("dense GQA equals multi-head attention with the key/value heads repeated") {
  const int64_t c = 24, heads = 6, kv_heads = 2, dh = c / heads;
  for (bool rotary : {false, true}) {
    CAPTURE(rotary);
    const pb_positional_kind pos = rotary ? PB_POSITIONAL_ROTARY : PB_POSITIONAL_NONE;
    rt::AttentionHandle gqa =
        dense_with([&](rt::ComponentConfig& k) { k.set_int("n_kv_heads", kv_heads); });
    gqa.init(layer_context(c, heads, 16, pos, 11));
    CHECK(parameter(gqa, "qkv.weight").shape() == eng::Shape{c + 2 * kv_heads * dh, c});
    CHECK(parameter(gqa, "qkv.bias").shape() == eng::Shape{c + 2 * kv_heads * dh});
    rt::AttentionHandle mha = dense_with([](rt::ComponentConfig&) {});
    mha.init(layer_context(c, heads, 16, pos, 12));
    eng::NoGradGuard no_grad;
    // Give the GQA layer non-zero biases, then copy everything into the MHA layer.
    eng::Generator gen(3);
    set_parameter(gqa, "qkv.bias", eng::uniform({c + 2 * kv_heads * dh}, gen, -0.5, 0.5));
    set_parameter(mha, "qkv.weight",
                  eng::Tensor::from_vector(repeat_kv_rows(parameter(gqa, "qkv.weight").to_vector(),
                                                          heads, kv_heads, dh, c),
                                           {3 * c, c}));
    set_parameter(mha, "qkv.bias",
                  eng::Tensor::from_vector(repeat_kv_rows(parameter(gqa, "qkv.bias").to_vector(),
                                                          heads, kv_heads, dh, 1),
                                           {3 * c}));
    set_parameter(mha, "proj.weight", parameter(gqa, "proj.weight"));
    set_parameter(mha, "proj.bias", parameter(gqa, "proj.bias"));
    const eng::Tensor x = eng::uniform({2, 13, c}, gen, -1.0, 1.0);
    const eng::Tensor y = gqa.forward(x, false);
    CHECK(max_abs_diff(y, mha.forward(x, false)) < 1e-5);
    // The grouping matters: the MHA layer with its own (unrepeated) k/v rows differs.
    set_parameter(mha, "qkv.weight", eng::uniform({3 * c, c}, gen, -0.5, 0.5));
    CHECK(max_abs_diff(y, mha.forward(x, false)) > 1e-2);
  }
}

TEST_CASE("dense GQA passes the attention conformance kit (decoding, causality, gradients)") {
  pt::AttentionConformanceOptions options;
  options.causality_tolerance = 0.0;  // bit for bit (issue 39: batch invariance)
  options.d_model = 24;
  options.n_heads = 6;
  options.grad_d_model = 8;
  options.grad_n_heads = 4;
  pt::check_attention_conformance(
      attention_test::dense_factory([](rt::ComponentConfig& k) { k.set_int("n_kv_heads", 2); }),
      options);
  options.n_heads = 3;  // multi-query attention: one key/value head
  options.grad_n_heads = 2;
  pt::check_attention_conformance(
      attention_test::dense_factory([](rt::ComponentConfig& k) { k.set_int("n_kv_heads", 1); }),
      options);
}

TEST_CASE("dense GQA decoding keeps only the key/value heads and equals the forward") {
  rt::AttentionHandle attn = dense_with([](rt::ComponentConfig& k) { k.set_int("n_kv_heads", 1); });
  attn.init(layer_context(32, 4, 64, PB_POSITIONAL_ROTARY));
  eng::NoGradGuard no_grad;
  eng::Generator gen(9);
  const eng::Tensor x = eng::uniform({1, 20, 32}, gen, -1.0, 1.0);
  const eng::Tensor full = attn.forward(x, false);
  const size_t before = eng::memory_stats(eng::cpu()).current_bytes;
  rt::AttentionHandle::State state = attn.state_create(1, 64);
  const size_t grown = eng::memory_stats(eng::cpu()).current_bytes - before;
  // K and V [1, Hkv = 1, 64, Dh = 8] f32: 2 * 64 * 8 * 4 B = 4 KiB; with all 4 heads 16 KiB.
  CHECK(grown >= size_t(2 * 64 * 8 * 4));
  CHECK(grown < size_t(2 * 64 * 32 * 4));
  const eng::Tensor prefill = attn.forward_step(state, x.slice(1, 0, 7));
  CHECK(max_abs_diff(prefill, full.slice(1, 0, 7)) < 1e-5);
  for (int64_t t = 7; t < 20; ++t)
    CHECK(max_abs_diff(attn.forward_step(state, x.slice(1, t, t + 1)), full.slice(1, t, t + 1)) <
          1e-5);
}

TEST_CASE("dense refuses n_kv_heads that does not divide n_heads, naming both") {
  rt::AttentionHandle attn = dense_with([](rt::ComponentConfig& k) { k.set_int("n_kv_heads", 3); });
  const std::string message = error_of([&] { attn.init(layer_context(32, 4, 8)); });
  CHECK(message.find("n_kv_heads 3 must divide n_heads 4") != std::string::npos);
  rt::AttentionHandle more = dense_with([](rt::ComponentConfig& k) { k.set_int("n_kv_heads", 8); });
  CHECK(error_of([&] { more.init(layer_context(32, 4, 8)); }).find("must divide") !=
        std::string::npos);
  rt::AttentionHandle no_rotary =
      dense_with([](rt::ComponentConfig& k) { k.set_string("rope_scaling", "llama3"); });
  CHECK(error_of([&] { no_rotary.init(layer_context(32, 4, 8)); }).find("not rotary") !=
        std::string::npos);
}

TEST_CASE("llama3 rope frequencies equal transformers' formula (values computed independently)") {
  patchbay_dense::RopeScaling scaling;  // LLaMA 3.1: factor 8, low 1, high 4, context 8192
  scaling.type = "llama3";
  const std::vector<double> f = patchbay_dense::rope_frequencies(128, 500000.0, scaling);
  REQUIRE(f.size() == 64);
  // Expected from transformers' _compute_llama3_parameters written out in Python (float64).
  CHECK(f[0] == doctest::Approx(1.0).epsilon(1e-12));                      // short: kept
  CHECK(f[20] == doctest::Approx(0.016560440080994446).epsilon(1e-12));    // short: kept
  CHECK(f[29] == doctest::Approx(0.002166570763503359).epsilon(1e-12));    // smoothed
  CHECK(f[32] == doctest::Approx(0.0005248461609929547).epsilon(1e-12));   // smoothed
  CHECK(f[34] == doctest::Approx(0.00017850781276799638).epsilon(1e-12));  // smoothed
  CHECK(f[40] == doctest::Approx(3.428102195952591e-05).epsilon(1e-12));   // long: / 8
  CHECK(f[63] == doctest::Approx(3.068925988914511e-07).epsilon(1e-12));   // long: / 8
  scaling.type = "none";
  CHECK(patchbay_dense::rope_frequencies(128, 500000.0, scaling)[40] ==
        doctest::Approx(0.0002742481756762073).epsilon(1e-12));
}

TEST_CASE("rotary by a frequency list equals the host's rotary op; llama3 scaling changes it") {
  // llama3 with factor 1 leaves every frequency as theta^(-2i/D): the composed path must then
  // give the fused op's answer; a real factor must change the far-position outputs.
  auto layer = [](double factor, const char* type) {
    rt::AttentionHandle attn = dense_with([&](rt::ComponentConfig& k) {
      k.set_int("n_kv_heads", 2);
      k.set_string("rope_scaling", type);
      k.set_float("rope_factor", factor);
      k.set_int("rope_original_context", 16);
    });
    attn.init(layer_context(32, 4, 64, PB_POSITIONAL_ROTARY, 21));
    return attn;
  };
  rt::AttentionHandle plain = layer(1.0, "none"), composed = layer(1.0, "llama3"),
                      scaled = layer(8.0, "llama3");
  eng::Generator gen(4);
  const eng::Tensor x = eng::uniform({2, 40, 32}, gen, -1.0, 1.0);
  const eng::Tensor y = plain.forward(x, false);
  CHECK(max_abs_diff(y, composed.forward(x, false)) < 2e-5);
  CHECK(max_abs_diff(y, scaled.forward(x, false)) > 1e-3);
  // The composed path is differentiable and decodes like its forward.
  eng::backward(eng::sum(scaled.forward(x, true)));
  CHECK(max_abs_diff(parameter(scaled, "qkv.weight").grad(),
                     eng::zeros_like(parameter(scaled, "qkv.weight"))) > 0.0);
  eng::NoGradGuard no_grad;
  rt::AttentionHandle::State state = scaled.state_create(2, 64);
  const eng::Tensor full = scaled.forward(x, false);
  CHECK(max_abs_diff(scaled.forward_step(state, x.slice(1, 0, 30)), full.slice(1, 0, 30)) < 1e-5);
  CHECK(max_abs_diff(scaled.forward_step(state, x.slice(1, 30, 40)), full.slice(1, 30, 40)) < 1e-5);
}

TEST_CASE("dense bias = false: no bias parameters, the same function as zero biases") {
  const int64_t c = 24, heads = 4;
  rt::AttentionHandle plain = dense_with([](rt::ComponentConfig& k) { k.set_bool("bias", false); });
  plain.init(layer_context(c, heads, 16, PB_POSITIONAL_NONE, 21));
  std::vector<std::string> names;
  for (const auto& p : plain.parameters()) names.push_back(p.name);
  CHECK(names == std::vector<std::string>{"qkv.weight", "proj.weight"});
  rt::AttentionHandle biased = dense_with([](rt::ComponentConfig&) {});
  biased.init(layer_context(c, heads, 16, PB_POSITIONAL_NONE, 21));  // same seed: same weights
  eng::Generator gen(4);
  const eng::Tensor x = eng::uniform({2, 9, c}, gen, -1.0, 1.0);
  {
    eng::NoGradGuard no_grad;
    CHECK(max_abs_diff(plain.forward(x, false), biased.forward(x, false)) == 0.0);
    CHECK(max_abs_diff(parameter(plain, "qkv.weight"), parameter(biased, "qkv.weight")) == 0.0);
  }
  // Training leaves nothing but the weights with gradients (the zeros are constants).
  const eng::Tensor loss = eng::sum(plain.forward(x, true));
  eng::backward(loss);
  CHECK(parameter(plain, "qkv.weight").grad().defined());
  CHECK(parameter(plain, "proj.weight").grad().defined());
}
