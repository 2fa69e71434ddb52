// The fused causal linear attention kernel (kernels/cpu/causal_linear_attention.hpp) against
// its plain O(T^2) reference, forward and backward, at several lengths and with E != M; the
// engine op (ops table version 5) by finite differences through the SDK gradcheck, its fp32
// accumulation for bf16 inputs, and its argument errors.
#include <doctest/doctest.h>

#include <cmath>
#include <random>
#include <string>
#include <vector>

#include "common/error.hpp"
#include "engine/autograd.hpp"
#include "engine/ops.hpp"
#include "engine/ops/causal_linear_attention.hpp"
#include "engine/ops_table.hpp"
#include "patchbay/attention.hpp"
#include "patchbay/kernels/causal_linear_attention.hpp"
#include "patchbay/tensor.hpp"
#include "patchbay/testing/gradcheck.hpp"

namespace {

namespace eng = patchbay::engine;
namespace kn = patchbay::kernels;

std::vector<float> random_vector(size_t n, uint32_t seed, float low = -1.f, float high = 1.f) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> dist(low, high);
  std::vector<float> v(n);
  for (float& x : v) x = dist(rng);
  return v;
}

double max_abs_diff(const std::vector<float>& a, const std::vector<float>& b) {
  REQUIRE(a.size() == b.size());
  double worst = 0;
  for (size_t i = 0; i < a.size(); ++i)
    worst = std::max(worst, std::fabs(static_cast<double>(a[i]) - b[i]));
  return worst;
}

double max_abs(const std::vector<float>& a) {
  double worst = 0;
  for (float x : a) worst = std::max(worst, std::fabs(static_cast<double>(x)));
  return worst;
}

}  // namespace

TEST_CASE("causal linear attention kernel equals the O(T^2) reference, forward and backward") {
  for (int64_t length : {1, 2, 7, 33, 130}) {
    CAPTURE(length);
    // Positive keys and queries as after a feature map, values of either sign.
    const kn::CausalLinearAttentionShape s{3, length, 5, 4};
    const size_t qk = static_cast<size_t>(s.rows * s.length * s.key_dim);
    const size_t vm = static_cast<size_t>(s.rows * s.length * s.value_dim);
    std::vector<float> q = random_vector(qk, 1, 0.f, 1.f), k = random_vector(qk, 2, 0.f, 1.f),
                       v = random_vector(vm, 3), dout = random_vector(vm, 4);
    std::vector<float> out(vm, 9.f), ref(vm, -9.f);
    kn::causal_linear_attention_forward(s, q.data(), k.data(), v.data(), out.data());
    kn::causal_linear_attention_reference_forward(s, q.data(), k.data(), v.data(), ref.data());
    const double scale = std::max(1.0, max_abs(ref));
    CHECK(max_abs_diff(out, ref) < 1e-5 * scale);

    std::vector<float> dq(qk, 9.f), dk(qk, 9.f), dv(vm, 9.f), rq(qk), rk(qk), rv(vm);
    kn::causal_linear_attention_backward(s, q.data(), k.data(), v.data(), dout.data(), dq.data(),
                                         dk.data(), dv.data());
    kn::causal_linear_attention_reference_backward(s, q.data(), k.data(), v.data(), dout.data(),
                                                   rq.data(), rk.data(), rv.data());
    CHECK(max_abs_diff(dq, rq) < 1e-5 * std::max(1.0, max_abs(rq)));
    CHECK(max_abs_diff(dk, rk) < 1e-5 * std::max(1.0, max_abs(rk)));
    CHECK(max_abs_diff(dv, rv) < 1e-5 * std::max(1.0, max_abs(rv)));
  }
}

TEST_CASE("causal linear attention reference is causal and matches a hand-computed case") {
  // One row, E = M = 1: out_l = q_l * sum_{j <= l} k_j v_j.
  const kn::CausalLinearAttentionShape s{1, 3, 1, 1};
  const std::vector<float> q = {1.f, 2.f, 3.f}, k = {1.f, 1.f, 2.f}, v = {1.f, -1.f, 0.5f};
  std::vector<float> out(3), ref(3);
  kn::causal_linear_attention_forward(s, q.data(), k.data(), v.data(), out.data());
  kn::causal_linear_attention_reference_forward(s, q.data(), k.data(), v.data(), ref.data());
  const std::vector<float> expected = {1.f, 0.f, 3.f};  // 1*1; 2*(1-1); 3*(1-1+1)
  CHECK(max_abs_diff(out, expected) < 1e-6);
  CHECK(max_abs_diff(ref, expected) < 1e-6);
}

TEST_CASE("causal_linear_attention op through the ops table: gradients by finite differences") {
  const pb_ops_table* ops = eng::host_ops_table();
  REQUIRE(PB_HAS_FIELD(ops, pb_ops_table, causal_linear_attention));
  REQUIRE(ops->version >= 5);
  patchbay::Ops make(ops);
  patchbay::Generator gen(ops, 11);
  for (int64_t length : {1, 3, 6}) {
    CAPTURE(length);
    patchbay::Tensor q = make.uniform({2, 2, length, 3}, gen, -1, 1);
    patchbay::Tensor k = make.uniform({2, 2, length, 3}, gen, -1, 1);
    patchbay::Tensor v = make.uniform({2, 2, length, 4}, gen, -1, 1);
    for (patchbay::Tensor* t : {&q, &k, &v}) t->requires_grad(true);
    patchbay::testing::GradcheckResult r = patchbay::testing::gradcheck(
        ops,
        [](const std::vector<patchbay::Tensor>& in) {
          return patchbay::causal_linear_attention(in[0], in[1], in[2]);
        },
        {q, k, v});
    CHECK_MESSAGE(r.ok, r.message);
  }
}

TEST_CASE("causal_linear_attention op accumulates in fp32 for bf16 inputs") {
  // 600 positions of keys and values all 1: the running sum reaches 600, where a bf16 running
  // sum would saturate at 256 (adding 1 no longer changes it). fp32 accumulation gives
  // out_l = l + 1, which rounds to bf16 within 0.4%.
  const int64_t t = 600;
  eng::Tensor ones = eng::Tensor::from_vector(std::vector<float>(t, 1.f), {1, t, 1});
  eng::Tensor ones16 = ones.to(eng::DType::kBF16);
  eng::Tensor out = eng::causal_linear_attention(ones16, ones16, ones16);
  CHECK(out.dtype() == eng::DType::kBF16);
  std::vector<float> values = out.to(eng::DType::kF32).to_vector();
  REQUIRE(values.size() == static_cast<size_t>(t));
  for (int64_t l = 0; l < t; l += 97)
    CHECK(std::fabs(values[static_cast<size_t>(l)] - static_cast<float>(l + 1)) <=
          0.004f * static_cast<float>(l + 1));
  CHECK(values.back() > 590.f);
}

TEST_CASE("causal_linear_attention op: argument errors name the op and the shapes") {
  auto message_of = [](auto&& call) -> std::string {
    try {
      call();
    } catch (const patchbay::Error& e) {
      return e.what();
    }
    return "";
  };
  eng::Tensor q = eng::zeros({2, 5, 3}), v = eng::zeros({2, 5, 4});
  CHECK(message_of([&] {
          eng::causal_linear_attention(q, eng::zeros({2, 5, 4}), v);
        }).find("causal_linear_attention: expected q and k") != std::string::npos);
  CHECK(message_of([&] {
          eng::causal_linear_attention(q, q, eng::zeros({2, 6, 4}));
        }).find("same leading dims") != std::string::npos);
  const pb_ops_table* ops = eng::host_ops_table();
  pb_tensor* out = nullptr;
  pb_status* st = ops->causal_linear_attention(nullptr, nullptr, nullptr, &out);
  REQUIRE(st != nullptr);
  CHECK(ops->status_code(st) == PB_STATUS_INVALID_ARGUMENT);
  CHECK(out == nullptr);
  ops->status_free(st);
}
