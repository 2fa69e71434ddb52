// attention_dense against a naive attention written here with engine ops (explicit T x T
// scores, -inf mask, softmax), through the host's AttentionHandle: causal and bidirectional,
// with and without rotary positions; plus what is specific to the dense layer and to the
// handle: refusals with messages naming the component and file, dropout only in training,
// gradients reaching the parameters, decoding through the handle.
#include <doctest/doctest.h>

#include <cmath>
#include <limits>
#include <string>
#include <vector>

#include "attention_fixture.hpp"
#include "common/error.hpp"
#include "engine/autograd.hpp"
#include "engine/ops.hpp"
#include "engine/ops_positional.hpp"

namespace {

namespace eng = patchbay::engine;
namespace rt = patchbay::runtime;
using attention_test::dense_handle;
using attention_test::layer_context;

eng::Tensor parameter(const rt::AttentionHandle& attn, const std::string& name) {
  for (const auto& p : attn.parameters())
    if (p.name == name) return p.tensor;
  FAIL("no parameter " << name);
  return {};
}

// Naive multi-head attention: scores materialised, masked with -inf above the diagonal.
eng::Tensor naive_attention(const rt::AttentionHandle& attn, const eng::Tensor& x, int64_t heads,
                            bool causal, bool rotary) {
  const int64_t b = x.size(0), t = x.size(1), c = x.size(2), dh = c / heads;
  eng::Tensor qkv =
      eng::matmul(x, parameter(attn, "qkv.weight"), false, true) + parameter(attn, "qkv.bias");
  auto split = [&](int64_t which) {
    return qkv.slice(2, which * c, (which + 1) * c)
        .reshape({b, t, heads, dh})
        .permute({0, 2, 1, 3})
        .contiguous();
  };
  eng::Tensor q = split(0), k = split(1), v = split(2);
  if (rotary) {
    q = eng::rotary_embedding(q, 0, 10000.0);
    k = eng::rotary_embedding(k, 0, 10000.0);
  }
  eng::Tensor scores =
      eng::mul_scalar(eng::matmul(q, k, false, true), 1.0 / std::sqrt(static_cast<double>(dh)));
  if (causal) {
    std::vector<float> above(static_cast<size_t>(t * t));
    for (int64_t i = 0; i < t; ++i)
      for (int64_t j = 0; j < t; ++j) above[static_cast<size_t>(i * t + j)] = j > i ? 1.f : 0.f;
    scores = eng::masked_fill(scores, eng::Tensor::from_vector(above, {t, t}),
                              -std::numeric_limits<double>::infinity());
  }
  eng::Tensor o = eng::matmul(eng::softmax(scores), v);  // [B, H, T, Dh]
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

std::string error_of(const std::function<void()>& call) {
  try {
    call();
  } catch (const patchbay::Error& e) {
    return e.what();
  }
  return "";
}

}  // namespace

TEST_CASE("dense forward equals a naive attention built from engine ops") {
  for (bool rotary : {false, true}) {
    CAPTURE(rotary);
    rt::AttentionHandle attn = dense_handle();
    attn.init(layer_context(32, 4, 16, rotary ? PB_POSITIONAL_ROTARY : PB_POSITIONAL_NONE));
    eng::NoGradGuard no_grad;
    eng::Tensor x = random_input({2, 11, 32}, 3);
    eng::Tensor y = attn.forward(x, false);
    CHECK(y.shape() == eng::Shape{2, 11, 32});
    CHECK(max_abs_diff(y, naive_attention(attn, x, 4, true, rotary)) < 2e-5);
    // The mask matters: the unmasked answer is far away.
    CHECK(max_abs_diff(y, naive_attention(attn, x, 4, false, rotary)) > 1e-2);
  }
}

TEST_CASE("dense with causal = false serves a bidirectional model and is refused by a causal one") {
  rt::AttentionHandle encoder = dense_handle(false);
  pb_layer_context ctx = layer_context(16, 2, 8);
  ctx.causal = 0;
  encoder.init(ctx);
  eng::NoGradGuard no_grad;
  eng::Tensor x = random_input({1, 8, 16}, 4);
  CHECK(max_abs_diff(encoder.forward(x, false), naive_attention(encoder, x, 2, false, false)) <
        2e-5);
  const std::string decode_error = error_of([&] { encoder.state_create(1, 8); });
  CHECK(decode_error.find("causal = false") != std::string::npos);

  rt::AttentionHandle refused = dense_handle(false);
  const std::string message = error_of([&] { refused.init(layer_context(16, 2, 8)); });
  CHECK(message.find("attention 'dense'") != std::string::npos);
  CHECK(message.find("attention_dense.so") != std::string::npos);
  CHECK(message.find("causal language model") != std::string::npos);
  CHECK(message.find("PB_STATUS_INVALID_ARGUMENT") != std::string::npos);
}

TEST_CASE("dense refuses contexts it cannot serve, with messages naming the values") {
  rt::AttentionHandle odd_heads = dense_handle();
  CHECK(error_of([&] { odd_heads.init(layer_context(30, 4, 8)); }).find("multiple of n_heads 4") !=
        std::string::npos);
  rt::AttentionHandle odd_rotary = dense_handle();
  CHECK(error_of([&] {
          odd_rotary.init(layer_context(9, 3, 8, PB_POSITIONAL_ROTARY));
        }).find("even head dim") != std::string::npos);
  rt::AttentionHandle twice = dense_handle();
  twice.init(layer_context(8, 2, 8));
  CHECK(error_of([&] { twice.init(layer_context(8, 2, 8)); }).find("init called twice") !=
        std::string::npos);
  rt::AttentionHandle too_long = dense_handle();
  too_long.init(layer_context(8, 2, 4));
  CHECK(error_of([&] {
          too_long.forward(random_input({1, 5, 8}, 1), false);
        }).find("max_seq_len 4") != std::string::npos);
}

TEST_CASE("dense parameters: GPT-2 names, shapes and init statistics") {
  rt::AttentionHandle attn = dense_handle();
  pb_layer_context ctx = layer_context(64, 4, 8);
  ctx.init_std = 0.02;
  ctx.residual_init_std = 0.005;
  attn.init(ctx);
  const auto params = attn.parameters();
  REQUIRE(params.size() == 4);
  CHECK(params[0].name == "qkv.weight");
  CHECK(params[0].tensor.shape() == eng::Shape{192, 64});
  CHECK(params[1].name == "qkv.bias");
  CHECK(params[1].tensor.shape() == eng::Shape{192});
  CHECK(params[2].name == "proj.weight");
  CHECK(params[2].tensor.shape() == eng::Shape{64, 64});
  CHECK(params[3].name == "proj.bias");
  auto std_of = [](const eng::Tensor& t) {
    std::vector<float> v = t.to_vector();
    double s = 0;
    for (float e : v) s += static_cast<double>(e) * e;
    return std::sqrt(s / static_cast<double>(v.size()));
  };
  CHECK(std_of(params[0].tensor) == doctest::Approx(0.02).epsilon(0.05));   // 12288 draws
  CHECK(std_of(params[2].tensor) == doctest::Approx(0.005).epsilon(0.05));  // 4096 draws
  CHECK(std_of(params[1].tensor) == 0.0);
  CHECK(std_of(params[3].tensor) == 0.0);
}

TEST_CASE("dense: dropout acts only in training; gradients reach every parameter") {
  rt::AttentionHandle attn = dense_handle(true, 0.5);
  attn.init(layer_context(16, 2, 8));
  eng::Tensor x = random_input({2, 8, 16}, 8);
  eng::Tensor eval = attn.forward(x, false);
  CHECK(max_abs_diff(attn.forward(x, false), eval) == 0.0);
  eng::Tensor train = attn.forward(x, true);
  std::vector<float> t = train.to_vector(), e = eval.to_vector();
  size_t zeroed = 0, scaled = 0;
  for (size_t i = 0; i < t.size(); ++i) {
    if (t[i] == 0.f)
      ++zeroed;
    else if (std::fabs(t[i] - 2.f * e[i]) < 1e-5)
      ++scaled;
  }
  CHECK(zeroed + scaled == t.size());  // each element dropped or scaled by 1/(1-p)
  CHECK(zeroed > t.size() / 4);
  CHECK(zeroed < 3 * t.size() / 4);
  eng::backward(eng::sum(train));
  for (const auto& p : attn.parameters()) {
    CAPTURE(p.name);
    REQUIRE(p.tensor.grad().defined());
    CHECK(max_abs_diff(p.tensor.grad(), eng::zeros_like(p.tensor)) > 0.0);
  }
}

TEST_CASE("decoding through the handle equals the forward; capacity errors name the layer") {
  rt::AttentionHandle attn = dense_handle();
  attn.init(layer_context(24, 3, 10, PB_POSITIONAL_ROTARY));
  CHECK(attn.has(PB_ATTENTION_CAP_CAUSAL));
  CHECK(attn.cache_kind() == PB_ATTENTION_CACHE_KV);
  CHECK(!attn.complexity().empty());
  eng::NoGradGuard no_grad;
  eng::Tensor x = random_input({2, 10, 24}, 12);
  eng::Tensor full = attn.forward(x, false);
  rt::AttentionHandle::State cache = attn.state_create(2, 10);
  std::vector<eng::Tensor> steps = {attn.forward_step(cache, x.slice(1, 0, 6))};
  for (int64_t t = 6; t < 10; ++t) steps.push_back(attn.forward_step(cache, x.slice(1, t, t + 1)));
  CHECK(cache.length() == 10);
  CHECK(max_abs_diff(eng::concat(steps, 1), full) < 1e-5);
  const std::string message = error_of([&] { attn.forward_step(cache, x.slice(1, 0, 1)); });
  CHECK(message.find("attention 'dense'") != std::string::npos);
  CHECK(message.find("capacity 10") != std::string::npos);
  CHECK(message.find("PB_STATUS_OUT_OF_RANGE") != std::string::npos);
  CHECK(error_of([&] { attn.state_create(1, 11); }).find("exceeds max_seq_len") !=
        std::string::npos);
  // A state outlives nothing it needs: moving the handle keeps the state usable.
  rt::AttentionHandle moved = std::move(attn);
  rt::AttentionHandle::State second = moved.state_create(1, 3);
  CHECK(moved.forward_step(second, x.slice(0, 0, 1).slice(1, 0, 3)).shape() ==
        eng::Shape{1, 3, 24});
}
