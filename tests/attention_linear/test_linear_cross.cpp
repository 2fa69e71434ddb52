// attention 'linear' and 'performer' as cross-attention (attention interface 1.3): the
// conformance kit's cross-attention checks with a naive reference written here from the
// parameters — the explicit [Tq, Tk] matrix of feature products a_ij = phi(q_i) . phi(k_j),
// zero at padded keys, o_i = sum_j a_ij v_j / (sum_j a_ij + eps) — which the layers compute
// instead through the per-sequence summaries S = sum phi(k) v^T and z = sum phi(k), once per
// memory. phi: elu + 1 (linear); FAVOR+ positive random features with the layer's own
// features.omega and both stabilisers (performer).
#include <doctest/doctest.h>

#include <cmath>
#include <functional>
#include <string>
#include <utility>
#include <vector>

#include "engine/ops.hpp"
#include "linear_fixture.hpp"

namespace {

namespace pt = patchbay::testing;
namespace rt = patchbay::runtime;
using patchbay::Tensor;
using Parameters = std::vector<std::pair<std::string, Tensor>>;

Tensor parameter(const Parameters& parameters, const std::string& name) {
  for (const auto& [n, t] : parameters)
    if (n == name) return t;
  FAIL("no parameter " << name);
  return {};
}

Tensor phi(const Tensor& x) { return x.relu() + (-((-x).relu())).exp(); }  // elu + 1

// phi(q), phi(k) [B, H, T, *] from q, k heads [B, H, T, Dh].
using FeatureMap = std::function<Tensor(const Tensor&, bool is_query)>;

Tensor naive_feature_cross(const Parameters& parameters, const Tensor& x, const Tensor& memory,
                           const std::vector<uint8_t>& valid, int64_t heads, double eps,
                           const FeatureMap& features) {
  patchbay::Ops ops(x.ops());
  const int64_t b = x.size(0), tq = x.size(1), tk = memory.size(1), c = x.size(2);
  const int64_t dh = c / heads;
  const Tensor weight = parameter(parameters, "qkv.weight");
  const Tensor bias = parameter(parameters, "qkv.bias");
  auto block = [&](const Tensor& in, int64_t which) {
    return (in.matmul(weight.slice(0, which * c, (which + 1) * c), false, true) +
            bias.slice(0, which * c, (which + 1) * c))
        .reshape({b, in.size(1), heads, dh})
        .permute({0, 2, 1, 3});
  };
  std::vector<float> attended(valid.begin(), valid.end());
  const Tensor a =
      features(block(x, 0), true).matmul(features(block(memory, 1), false), false, true) *
      ops.from_vector(attended, {b, 1, 1, tk});  // [B, H, Tq, Tk]
  const Tensor o = (a.matmul(block(memory, 2)) / (a.sum({3}, true) + eps))
                       .permute({0, 2, 1, 3})
                       .reshape({b, tq, c});
  return o.matmul(parameter(parameters, "proj.weight"), false, true) +
         parameter(parameters, "proj.bias");
}

Tensor naive_linear_cross(const Parameters& parameters, const Tensor& x, const Tensor& memory,
                          const std::vector<uint8_t>& valid, int64_t heads, double eps) {
  return naive_feature_cross(parameters, x, memory, valid, heads, eps,
                             [](const Tensor& t, bool) { return phi(t); });
}

// FAVOR+ (performer_attention.hpp): u = (x Dh^-1/4) omega^T; phi(q) = exp(u - max_f u),
// phi(k) = exp(u - |k Dh^-1/4|^2 / 2 - max_f |omega_f|^2 / 2).
Tensor naive_performer_cross(const Parameters& parameters, const Tensor& x, const Tensor& memory,
                             const std::vector<uint8_t>& valid, int64_t heads) {
  const Tensor omega = parameter(parameters, "features.omega");
  const int64_t dh = x.size(2) / heads;
  const double scale = std::pow(static_cast<double>(dh), -0.25);
  const double c = 0.5 * omega.pow(2.0).sum({1}).max().to_vector()[0];
  return naive_feature_cross(parameters, x, memory, valid, heads, 1e-30,
                             [&](const Tensor& t, bool is_query) {
                               const Tensor s = t * scale;
                               const Tensor u = s.matmul(omega, false, true);
                               if (is_query) return (u - u.max({3}, true)).exp();
                               return (u - s.pow(2.0).sum({3}, true) * 0.5 - c).exp();
                             });
}

TEST_CASE("attention 'linear' cross-attention equals the naive feature-product reference") {
  pt::AttentionConformanceOptions options;
  options.cross_reference = [&](const Parameters& p, const Tensor& x, const Tensor& memory,
                                const std::vector<uint8_t>& valid) {
    return naive_linear_cross(p, x, memory, valid, options.n_heads, 1e-6);
  };
  pt::check_cross_attention_conformance(linear_test::factory("linear", [](rt::ComponentConfig&) {}),
                                        options);
}

TEST_CASE("attention 'linear' cross-attention with 3 heads and a longer memory") {
  pt::AttentionConformanceOptions options;
  options.d_model = 12;
  options.n_heads = 3;
  options.grad_d_model = 6;
  options.grad_n_heads = 3;
  options.cross_memory_len = 11;
  options.cross_query_len = 2;
  options.cross_reference = [&](const Parameters& p, const Tensor& x, const Tensor& memory,
                                const std::vector<uint8_t>& valid) {
    return naive_linear_cross(p, x, memory, valid, options.n_heads, 1e-6);
  };
  pt::check_cross_attention_conformance(linear_test::factory("linear", [](rt::ComponentConfig&) {}),
                                        options);
}

TEST_CASE("attention 'performer' cross-attention equals the naive FAVOR+ reference") {
  pt::AttentionConformanceOptions options;
  options.non_trainable_parameters = {"features.omega", "features.training_forwards"};
  options.cross_tolerance = 2e-5;
  options.cross_reference = [&](const Parameters& p, const Tensor& x, const Tensor& memory,
                                const std::vector<uint8_t>& valid) {
    return naive_performer_cross(p, x, memory, valid, options.n_heads);
  };
  pt::check_cross_attention_conformance(
      linear_test::factory("performer", [](rt::ComponentConfig&) {}), options);
}

TEST_CASE("attention 'performer' cross-attention: a training memory counts toward the redraw") {
  rt::AttentionHandle attn = linear_test::handle(
      "performer", [](rt::ComponentConfig& c) { c.set_int("redraw_interval", 1); });
  attn.init(linear_test::layer_context(8, 2, 16, /*causal=*/true, /*seed=*/4));
  auto omega = [&] {
    for (const auto& p : attn.parameters())
      if (p.name == "features.omega") return p.tensor.to_vector();
    FAIL("no features.omega");
    return std::vector<float>{};
  };
  patchbay::engine::Generator gen(1);
  const patchbay::engine::Tensor memory = patchbay::engine::uniform({1, 5, 8}, gen, -1.0, 1.0);
  const patchbay::engine::Tensor x = patchbay::engine::uniform({1, 3, 8}, gen, -1.0, 1.0);
  const std::vector<float> draw0 = omega();
  { rt::AttentionHandle::CrossMemory m = attn.cross_memory_create(memory, nullptr, false); }
  CHECK(omega() == draw0);  // evaluation never redraws
  rt::AttentionHandle::CrossMemory first = attn.cross_memory_create(memory, nullptr, true);
  CHECK(omega() == draw0);  // training forward 0: draw 0
  const std::vector<float> y0 = attn.forward_cross(x, first, true).to_vector();
  rt::AttentionHandle::CrossMemory second = attn.cross_memory_create(memory, nullptr, true);
  CHECK(omega() != draw0);  // training forward 1: draw 1 (interval 1)
  // The first memory keeps the features it was computed with: its queries use them too.
  CHECK(attn.forward_cross(x, first, false).to_vector() == y0);
}

}  // namespace
