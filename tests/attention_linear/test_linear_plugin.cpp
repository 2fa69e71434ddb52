// attention_linear loaded as its real .so: the forward against the naive O(T^2) formula
// written here with engine ops (explicit T x T kernel matrix, lower-triangular mask, no
// 1/sqrt(d), eps = 1e-6), causal and bidirectional, gradients included; recurrent decoding
// equal to the full forward over 520 steps with a state whose size does not grow; a causal
// leak test at a longer length; refusals; and the SDK attention conformance kit.
#include <doctest/doctest.h>

#include <cmath>
#include <string>
#include <vector>

#include "common/error.hpp"
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

eng::Tensor elu_plus_one(const eng::Tensor& x) {
  // Written differently from the plugin: where(x > 0, x + 1, exp(x)) through a mask.
  std::vector<float> values = x.to_vector(), positive(values.size());
  for (size_t i = 0; i < values.size(); ++i) positive[i] = values[i] > 0 ? 1.f : 0.f;
  eng::Tensor mask = eng::Tensor::from_vector(positive, x.shape());
  eng::Tensor one_minus = eng::add_scalar(eng::mul_scalar(mask, -1.0), 1.0);
  return mask * eng::add_scalar(x, 1.0) + one_minus * eng::exp(x);
}

// y_i = sum_{j (<= i)} (phi(q_i).phi(k_j)) v_j / (sum_{j (<= i)} phi(q_i).phi(k_j) + eps).
eng::Tensor naive_linear(const rt::AttentionHandle& attn, const eng::Tensor& x, int64_t heads,
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
  eng::Tensor a = eng::matmul(elu_plus_one(split(0)), elu_plus_one(split(1)), false, true);
  if (causal) {
    std::vector<float> lower(static_cast<size_t>(t * t));
    for (int64_t i = 0; i < t; ++i)
      for (int64_t j = 0; j < t; ++j) lower[static_cast<size_t>(i * t + j)] = j <= i ? 1.f : 0.f;
    a = a * eng::Tensor::from_vector(lower, {t, t});
  }
  eng::Tensor o = eng::matmul(a, split(2)) / eng::add_scalar(eng::sum(a, {3}, true), 1e-6);
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

rt::AttentionHandle linear_handle(bool causal) {
  return linear_test::handle("linear",
                             [causal](rt::ComponentConfig& c) { c.set_bool("causal", causal); });
}

}  // namespace

TEST_CASE("linear forward equals the naive O(T^2) formula, causal and bidirectional") {
  for (bool causal : {true, false}) {
    for (int64_t t : {1, 5, 17, 64}) {
      CAPTURE(causal);
      CAPTURE(t);
      rt::AttentionHandle attn = linear_handle(causal);
      attn.init(layer_context(32, 4, 64, causal));
      eng::NoGradGuard no_grad;
      eng::Tensor x = random_input({2, t, 32}, 3 + static_cast<uint64_t>(t));
      eng::Tensor y = attn.forward(x, false);
      CHECK(y.shape() == eng::Shape{2, t, 32});
      CHECK(max_abs_diff(y, naive_linear(attn, x, 4, causal)) < 2e-5);
      if (t > 1)  // the mask matters: the other mode's answer is far away
        CHECK(max_abs_diff(y, naive_linear(attn, x, 4, !causal)) > 1e-3);
    }
  }
}

TEST_CASE("linear gradients equal the naive formula's gradients") {
  for (int64_t t : {3, 16, 40}) {
    CAPTURE(t);
    rt::AttentionHandle attn = linear_handle(true);
    attn.init(layer_context(16, 2, 64, true));
    eng::Tensor x = random_input({2, t, 16}, 9);
    x.set_requires_grad(true);
    eng::Tensor w = random_input({2, t, 16}, 10);
    eng::backward(eng::sum(attn.forward(x, false) * w));
    std::vector<eng::Tensor> fused = {x.grad()};
    for (const auto& p : attn.parameters()) fused.push_back(p.tensor.grad());
    x.zero_grad();
    for (auto p : attn.parameters()) p.tensor.zero_grad();
    eng::backward(eng::sum(naive_linear(attn, x, 2, true) * w));
    std::vector<eng::Tensor> naive = {x.grad()};
    for (const auto& p : attn.parameters()) naive.push_back(p.tensor.grad());
    for (size_t i = 0; i < fused.size(); ++i) {
      CAPTURE(i);
      REQUIRE(fused[i].defined());
      REQUIRE(naive[i].defined());
      CHECK(max_abs_diff(fused[i], naive[i]) < 5e-4);
    }
  }
}

TEST_CASE("linear recurrent decoding equals the full forward over 520 steps") {
  const int64_t t = 520;
  rt::AttentionHandle attn = linear_handle(true);
  attn.init(layer_context(16, 2, t, true));
  eng::NoGradGuard no_grad;
  eng::Tensor x = random_input({2, t, 16}, 21);
  eng::Tensor full = attn.forward(x, false);
  rt::AttentionHandle::State state = attn.state_create(2, t);
  std::vector<eng::Tensor> steps;
  double worst = 0;
  for (int64_t i = 0; i < t; ++i) {
    eng::Tensor y = attn.forward_step(state, x.slice(1, i, i + 1));
    worst = std::max(worst, max_abs_diff(y, full.slice(1, i, i + 1).contiguous()));
  }
  CHECK(state.length() == t);
  CHECK(worst < 1e-4);
  // Chunks of 7 (prefill-like) give the same answers.
  rt::AttentionHandle::State chunked = attn.state_create(2, t);
  double worst_chunked = 0;
  for (int64_t i = 0; i < t; i += 7) {
    const int64_t end = std::min(t, i + 7);
    eng::Tensor y = attn.forward_step(chunked, x.slice(1, i, end));
    worst_chunked = std::max(worst_chunked, max_abs_diff(y, full.slice(1, i, end).contiguous()));
  }
  CHECK(worst_chunked < 1e-4);
}

TEST_CASE("linear: perturbing the future never changes the past (causal-leak test, T = 96)") {
  const int64_t t = 96;
  rt::AttentionHandle attn = linear_handle(true);
  attn.init(layer_context(16, 2, t, true));
  eng::NoGradGuard no_grad;
  eng::Tensor x = random_input({1, t, 16}, 31);
  eng::Tensor y = attn.forward(x, false);
  for (int64_t cut : {0, 40, 95}) {
    CAPTURE(cut);
    std::vector<float> values = x.to_vector();
    for (size_t i = static_cast<size_t>((cut + 1) * 16); i < values.size(); ++i)
      values[i] = -values[i] * 3.f;
    if (cut == 95) values[static_cast<size_t>(95 * 16)] += 5.f;  // perturb the last token
    eng::Tensor perturbed = eng::Tensor::from_vector(values, {1, t, 16});
    eng::Tensor y2 = attn.forward(perturbed, false);
    const int64_t keep = cut == 95 ? 95 : cut + 1;
    CHECK(max_abs_diff(y.slice(1, 0, keep).contiguous(), y2.slice(1, 0, keep).contiguous()) == 0.0);
    CHECK(max_abs_diff(y.slice(1, keep, t).contiguous(), y2.slice(1, keep, t).contiguous()) > 1e-3);
  }
}

TEST_CASE("linear: refusals and declarations") {
  rt::AttentionHandle attn = linear_handle(false);
  std::string message;
  try {
    attn.init(layer_context(16, 2, 8, true));
  } catch (const patchbay::Error& e) {
    message = e.what();
  }
  CHECK(message.find("causal = false") != std::string::npos);
  rt::AttentionHandle encoder = linear_handle(false);
  encoder.init(layer_context(16, 2, 8, false));
  CHECK_THROWS(encoder.state_create(1, 8));
  rt::AttentionHandle decoder = linear_handle(true);
  CHECK(decoder.cache_kind() == PB_ATTENTION_CACHE_RECURRENT);
  CHECK(decoder.has(PB_ATTENTION_CAP_CAUSAL));
  CHECK(decoder.has(PB_ATTENTION_CAP_NONCAUSAL));
  CHECK_FALSE(decoder.has(PB_ATTENTION_CAP_ROTARY));
}

TEST_CASE("attention 'linear' passes the attention conformance kit") {
  pt::AttentionConformanceOptions options;
  options.causality_tolerance = 0.0;  // bit for bit (issue 39: batch invariance)
  pt::check_attention_conformance(linear_test::factory("linear", [](rt::ComponentConfig&) {}),
                                  options);
}

TEST_CASE("linear and performer recurrent states reorder between beams (state_reorder)") {
  for (const std::string kind : {"linear", "performer"}) {
    CAPTURE(kind);
    rt::AttentionHandle attn = linear_test::handle(kind, [](rt::ComponentConfig&) {});
    attn.init(layer_context(16, 2, 32, true));
    eng::NoGradGuard no_grad;
    eng::Tensor x = random_input({3, 12, 16}, 51);  // three beams' prefixes
    rt::AttentionHandle::State state = attn.state_create(3, 32);
    attn.forward_step(state, x.slice(1, 0, 10));
    // Beam 0 dies, beam 2 forks: new beams are old (2, 2, 1).
    const std::vector<int64_t> source = {2, 2, 1};
    REQUIRE(attn.reorder_state(state, source));
    CHECK(state.length() == 10);
    eng::Tensor next = random_input({3, 2, 16}, 52);
    eng::Tensor y = attn.forward_step(state, next);
    // Reference: a fresh state fed each new beam's own history, then the same next tokens.
    for (int64_t i = 0; i < 3; ++i) {
      const int64_t from = source[static_cast<size_t>(i)];
      rt::AttentionHandle::State single = attn.state_create(1, 32);
      attn.forward_step(single, x.slice(0, from, from + 1).slice(1, 0, 10));
      eng::Tensor expected = attn.forward_step(single, next.slice(0, i, i + 1));
      CHECK(max_abs_diff(y.slice(0, i, i + 1).contiguous(), expected) < 1e-5);
    }
  }
}
