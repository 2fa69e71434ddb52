// attention_dense with ALiBi positions and a sliding window: the paper's slopes for any head
// count, the layer against softmax(q k^T s + bias + mask) v computed here by hand from the
// layer's own parameters, KV-cache decoding equal to the full forward (with the absolute
// positions the bias and window need), and decoding that reads the cache in place (the
// allocator's peak during a step stays far below one copy of the cache prefix).
#include <doctest/doctest.h>

#include <cmath>
#include <limits>
#include <string>
#include <vector>

#include "alibi_slopes.hpp"
#include "attention_fixture.hpp"
#include "engine/autograd.hpp"
#include "engine/device.hpp"
#include "engine/ops.hpp"

namespace {

namespace eng = patchbay::engine;
namespace rt = patchbay::runtime;
using attention_test::layer_context;

rt::AttentionHandle dense_with_window(int64_t window) {
  rt::ComponentConfig config(attention_test::dense_descriptor());
  config.set_int("window", window);
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

// The dense layer by hand: scores = q k^T / sqrt(Dh) - slope_h (i - j), -inf where j > i or
// i - j >= window (window > 0), softmax, times v, merge heads, output projection.
eng::Tensor by_hand(const rt::AttentionHandle& attn, const eng::Tensor& x, int64_t heads,
                    const std::vector<double>& slopes, int64_t window) {
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
  eng::Tensor scores =
      eng::mul_scalar(eng::matmul(q, k, false, true), 1.0 / std::sqrt(static_cast<double>(dh)));
  std::vector<float> bias(static_cast<size_t>(heads * t * t));
  for (int64_t h = 0; h < heads; ++h)
    for (int64_t i = 0; i < t; ++i)
      for (int64_t j = 0; j < t; ++j) {
        const bool hidden = j > i || (window > 0 && i - j >= window);
        bias[static_cast<size_t>((h * t + i) * t + j)] =
            hidden ? -std::numeric_limits<float>::infinity()
                   : static_cast<float>(slopes.empty() ? 0.0 : -slopes[size_t(h)] * double(i - j));
      }
  scores = scores + eng::Tensor::from_vector(bias, {heads, t, t});
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

// Decodes x [B, T, C] as prefill `first`, then one token at a time; outputs concatenated.
eng::Tensor decode(rt::AttentionHandle& attn, const eng::Tensor& x, int64_t first) {
  rt::AttentionHandle::State cache = attn.state_create(x.size(0), x.size(1));
  std::vector<eng::Tensor> steps = {attn.forward_step(cache, x.slice(1, 0, first))};
  for (int64_t t = first; t < x.size(1); ++t)
    steps.push_back(attn.forward_step(cache, x.slice(1, t, t + 1)));
  return eng::concat(steps, 1);
}

}  // namespace

TEST_CASE("ALiBi slopes: the paper's sequence for powers of two, interleaved otherwise") {
  using patchbay_dense::alibi_slopes;
  const std::vector<double> eight = alibi_slopes(8);
  REQUIRE(eight.size() == 8);
  for (size_t h = 0; h < 8; ++h) CHECK(eight[h] == std::ldexp(1.0, -int(h) - 1));  // 1/2..1/256
  CHECK(alibi_slopes(4) == std::vector<double>{0.25, 0.0625, 0.015625, 0.00390625});
  CHECK(alibi_slopes(1) == std::vector<double>{std::ldexp(1.0, -8)});
  // 6 heads (paper's get_slopes(6)): the 4 of n = 4, then slopes 0 and 2 of n = 8.
  CHECK(alibi_slopes(6) == std::vector<double>{0.25, 0.0625, 0.015625, 0.00390625, 0.5, 0.125});
  // 12 heads: the 8 of n = 8, then 2^-0.5, 2^-1.5, 2^-2.5, 2^-3.5 (every other of n = 16).
  const std::vector<double> twelve = alibi_slopes(12);
  REQUIRE(twelve.size() == 12);
  for (size_t h = 0; h < 8; ++h) CHECK(twelve[h] == eight[h]);
  for (size_t e = 0; e < 4; ++e)
    CHECK(twelve[8 + e] == doctest::Approx(std::exp2(-0.5 - double(e))).epsilon(1e-15));
  CHECK_THROWS_AS(alibi_slopes(0), std::invalid_argument);
}

TEST_CASE("dense with ALiBi equals softmax(q k^T s + bias) v by hand, and decodes the same") {
  rt::AttentionHandle attn = attention_test::dense_handle();
  attn.init(layer_context(32, 4, 16, PB_POSITIONAL_ALIBI));
  CHECK(attn.has(PB_ATTENTION_CAP_ALIBI));
  eng::NoGradGuard no_grad;
  eng::Tensor x = random_input({2, 13, 32}, 21);
  eng::Tensor y = attn.forward(x, false);
  const std::vector<double> paper = {0.25, 0.0625, 0.015625, 0.00390625};  // 4 heads
  CHECK(max_abs_diff(y, by_hand(attn, x, 4, paper, 0)) < 2e-5);
  CHECK(max_abs_diff(y, by_hand(attn, x, 4, {}, 0)) > 1e-3);  // the bias is not ignored
  CHECK(max_abs_diff(decode(attn, x, 5), y) < 1e-5);
  CHECK(max_abs_diff(decode(attn, x, 1), y) < 1e-5);
}

TEST_CASE("dense with a sliding window (and with ALiBi) equals the hand computation") {
  for (const bool alibi : {false, true}) {
    CAPTURE(alibi);
    rt::AttentionHandle attn = dense_with_window(3);
    attn.init(layer_context(24, 2, 16, alibi ? PB_POSITIONAL_ALIBI : PB_POSITIONAL_NONE));
    eng::NoGradGuard no_grad;
    eng::Tensor x = random_input({1, 11, 24}, 31);
    eng::Tensor y = attn.forward(x, false);
    const std::vector<double> slopes =
        alibi ? std::vector<double>{0.0625, 0.00390625} : std::vector<double>{};  // 2 heads
    CHECK(max_abs_diff(y, by_hand(attn, x, 2, slopes, 3)) < 2e-5);
    CHECK(max_abs_diff(y, by_hand(attn, x, 2, slopes, 0)) > 1e-3);  // the window matters
    CHECK(max_abs_diff(decode(attn, x, 4), y) < 1e-5);
  }
}

TEST_CASE("a decode step reads the KV cache in place: no per-step copy of the prefix") {
  // d_model 128, 4 heads, cache capacity 2048 filled to 2000. Copying the k and v prefixes
  // (what the layer did before) would take 2 * 2000 * 128 * 4 B = 2 MB per step.
  rt::AttentionHandle attn = attention_test::dense_handle();
  attn.init(layer_context(128, 4, 2048, PB_POSITIONAL_ALIBI));
  eng::NoGradGuard no_grad;
  rt::AttentionHandle::State cache = attn.state_create(1, 2048);
  eng::Tensor prompt = random_input({1, 2000, 128}, 41);
  for (int64_t t = 0; t < 2000; t += 500) attn.forward_step(cache, prompt.slice(1, t, t + 500));
  REQUIRE(cache.length() == 2000);
  eng::Tensor token = random_input({1, 1, 128}, 42);
  const size_t before = eng::memory_stats(eng::cpu()).current_bytes;
  eng::reset_peak(eng::cpu());
  eng::Tensor y = attn.forward_step(cache, token);
  const size_t grown = eng::memory_stats(eng::cpu()).peak_bytes - before;
  const size_t prefix_copy = size_t(2 * 2000 * 128) * sizeof(float);
  CHECK(grown < prefix_copy / 32);
  CHECK(y.shape() == eng::Shape{1, 1, 128});
  MESSAGE("decode step at length 2000: peak growth "
          << grown << " B (a prefix copy: " << prefix_copy << " B)");
}
