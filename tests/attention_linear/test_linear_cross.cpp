// attention 'linear' as cross-attention (attention interface 1.3): the conformance kit's
// cross-attention checks with a naive reference written here from the parameters — the
// explicit [Tq, Tk] matrix of feature products a_ij = phi(q_i) . phi(k_j), zero at padded keys,
// o_i = sum_j a_ij v_j / (sum_j a_ij + eps) — which the layer computes instead through the
// per-sequence summaries S = sum phi(k) v^T and z = sum phi(k), once per memory.
#include <doctest/doctest.h>

#include <string>
#include <utility>
#include <vector>

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

Tensor naive_linear_cross(const Parameters& parameters, const Tensor& x, const Tensor& memory,
                          const std::vector<uint8_t>& valid, int64_t heads, double eps) {
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
  const Tensor a = phi(block(x, 0)).matmul(phi(block(memory, 1)), false, true) *
                   ops.from_vector(attended, {b, 1, 1, tk});  // [B, H, Tq, Tk]
  const Tensor o = (a.matmul(block(memory, 2)) / (a.sum({3}, true) + eps))
                       .permute({0, 2, 1, 3})
                       .reshape({b, tq, c});
  return o.matmul(parameter(parameters, "proj.weight"), false, true) +
         parameter(parameters, "proj.bias");
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

}  // namespace
