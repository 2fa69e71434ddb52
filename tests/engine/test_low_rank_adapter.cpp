// Low-rank adapters applied by the engine's products (engine/low_rank_adapter.hpp): against
// the materialised weight W0 + s·B·A (forward and every gradient, dropout 0) in the forms
// plugins use — row slices of a fused weight (q and v rows of a qkv), the transposed spelling,
// linear with and without a recorded gradient, bf16 autocast; central finite differences;
// dropout's mask statistics and expected value, its determinism per stream and its absence
// without a gradient; the refusals of uses the adapter cannot follow; and matmul's backward
// giving no gradient to a frozen operand.
#include <doctest/doctest.h>

#include <cmath>
#include <string>
#include <vector>

#include "common/error.hpp"
#include "engine/low_rank_adapter.hpp"
#include "test_util.hpp"

using namespace patchbay::engine;
using namespace patchbay::engine::testing;

namespace {

constexpr int64_t kRows = 12, kIn = 8, kRank = 2;

// A frozen fused weight [12, 8] with adapters on rows [0, 4) ("q") and [8, 12) ("v"), rank 2.
struct Fixture {
  Tensor w = random_tensor({kRows, kIn}, 1);
  Tensor a_q = random_tensor({kRank, kIn}, 2).set_requires_grad(true);
  Tensor b_q = random_tensor({4, kRank}, 3).set_requires_grad(true);
  Tensor a_v = random_tensor({kRank, kIn}, 4).set_requires_grad(true);
  Tensor b_v = random_tensor({4, kRank}, 5).set_requires_grad(true);
  double scale = 1.5;
  AttachedLowRankAdapter q, v;

  explicit Fixture(double dropout = 0.0) {
    q = attach_low_rank_adapter(spec(0, a_q, b_q, dropout, 0, "test q"));
    v = attach_low_rank_adapter(spec(8, a_v, b_v, dropout, 1, "test v"));
  }
  LowRankAdapter spec(int64_t row_begin, const Tensor& a, const Tensor& b, double dropout,
                      uint64_t key, const std::string& label) const {
    LowRankAdapter s;
    s.weight = w;
    s.row_begin = row_begin;
    s.rows = b.size(0);
    s.a = a;
    s.b = b;
    s.scale = scale;
    s.dropout = dropout;
    s.dropout_key = key;
    s.label = label;
    return s;
  }
  // W0 + s·B·A on the adapted rows, built by differentiable ops (the reference's gradients).
  Tensor merged() const {
    const Tensor dq = mul_scalar(matmul(b_q, a_q), scale), dv = mul_scalar(matmul(b_v, a_v), scale);
    return concat({add(w.narrow(0, 0, 4), dq), w.narrow(0, 4, 4), add(w.narrow(0, 8, 4), dv)}, 0);
  }
  std::vector<Tensor> trained() const { return {a_q, b_q, a_v, b_v}; }
};

// The plugin's training form: one product per part on its rows (attention_dense).
Tensor per_part(const Tensor& x, const Tensor& w) {
  return concat({matmul(x, w.slice(0, 0, 4), false, true), matmul(x, w.slice(0, 4, 8), false, true),
                 matmul(x, w.slice(0, 8, 12), false, true)},
                -1);
}

std::vector<double> doubles(const std::vector<float>& v) { return {v.begin(), v.end()}; }

void zero_grads(const std::vector<Tensor>& ts) {
  for (Tensor t : ts) t.zero_grad();
}

// Runs f (with x) and the reference (x · mergedᵀ) backward from sum(y * r); compares y, dx and
// the adapters' gradients within `tol`.
void check_against_merged(Fixture& f, const std::function<Tensor(const Tensor&)>& product,
                          double tol, const std::string& what) {
  INFO(what);
  Tensor x = random_tensor({2, 3, kIn}, 7).set_requires_grad(true);
  const Tensor r = random_tensor({2, 3, kRows}, 8);
  std::vector<Tensor> leaves = f.trained();
  leaves.push_back(x);
  zero_grads(leaves);
  const Tensor y = product(x);
  backward(sum(mul(y, r)));
  std::vector<std::vector<float>> adapted;
  for (const Tensor& t : leaves) adapted.push_back(t.grad().to_vector());
  CHECK_FALSE(f.w.grad().defined());  // the frozen weight: no gradient at all
  zero_grads(leaves);
  f.q.reset();  // the reference computes with the merged weight, no adapter
  f.v.reset();
  const Tensor y_ref = matmul(x, f.merged(), false, true);
  backward(sum(mul(y_ref, r)));
  check_close(doubles(y.to_vector()), doubles(y_ref.to_vector()), tol, tol, what + ": y");
  for (size_t i = 0; i < leaves.size(); ++i) {
    const std::vector<float> ref = leaves[i].grad().to_vector();
    check_close(doubles(adapted[i]), doubles(ref), tol, tol,
                what + ": gradient " + std::to_string(i));
  }
}

double mean_of(const std::vector<float>& v) {
  double s = 0;
  for (float x : v) s += x;
  return s / static_cast<double>(v.size());
}

}  // namespace

TEST_CASE("adapted products equal the materialised weight W0 + s·B·A, forward and gradients") {
  {
    Fixture f;
    check_against_merged(
        f, [&](const Tensor& x) { return per_part(x, f.w); }, 2e-6, "row slices of a fused weight");
  }
  {
    Fixture f;
    check_against_merged(
        f, [&](const Tensor& x) { return matmul(x, f.w, false, true); }, 2e-6,
        "one product on the whole weight");
  }
  {
    Fixture f;
    check_against_merged(
        f, [&](const Tensor& x) { return matmul(x, f.w.transpose(0, 1), false, false); }, 2e-6,
        "the transposed spelling x · (Wᵀ view)");
  }
  {
    Fixture f;
    const Tensor bias = random_tensor({kRows}, 9);
    check_against_merged(
        f, [&](const Tensor& x) { return sub(linear(x, f.w, bias), bias); },  // linear, recorded
        2e-6, "linear");
  }
  {  // a view outside every adapter (the k rows) is the plain product
    Fixture f;
    const Tensor x = random_tensor({3, kIn}, 10);
    const Tensor k_rows = matmul(x, f.w.slice(0, 4, 8), false, true);
    f.q.reset();
    f.v.reset();
    CHECK(k_rows.to_vector() == matmul(x, f.w.slice(0, 4, 8), false, true).to_vector());
  }
  {  // decoding: linear's fused no-grad path gives way to the adapted product
    Fixture f;
    NoGradGuard no_grad;
    const Tensor x = random_tensor({1, 1, kIn}, 11);
    const Tensor bias = random_tensor({kRows}, 12);
    const std::vector<float> adapted = linear(x, f.w, bias).to_vector();
    f.q.reset();
    f.v.reset();
    const std::vector<float> merged = linear(x, f.merged(), bias).to_vector();
    check_close(doubles(adapted), doubles(merged), 2e-6, 2e-6, "decoding linear");
  }
  {  // bf16 autocast: both sides bf16 GEMMs; the frozen weight's bf16 copy is cached
    Fixture f;
    AutocastGuard bf16(DType::kBF16);
    check_against_merged(
        f, [&](const Tensor& x) { return per_part(x, f.w); }, 5e-2, "bf16");
  }
}

TEST_CASE("adapter gradients (A, B, x) equal central finite differences") {
  Fixture f;
  const Tensor x = random_tensor({2, 3, kIn}, 13).set_requires_grad(true);
  check_gradients([&](const std::vector<Tensor>& in) { return per_part(in[4], f.w); },
                  {f.a_q, f.b_q, f.a_v, f.b_v, x}, "adapted fused weight", 1e-2, 1e-2, 1e-3);
}

TEST_CASE("adapter dropout: mask statistics, expected value, determinism, training only") {
  // W0 = 0, A = I, B = I (rank = in = 4): y = s · drop(x); with x = 1 each entry is 0 or
  // s / (1 - p).
  const double p = 0.3, s = 2.0;
  const int64_t n = 20000, k = 4;
  Tensor w = zeros({k, k});
  Tensor eye = zeros({k, k});
  for (int64_t i = 0; i < k; ++i) eye.data<float>()[i * k + i] = 1.0f;
  Tensor a = eye.clone().set_requires_grad(true), b = eye.clone().set_requires_grad(true);
  LowRankAdapter spec;
  spec.weight = w;
  spec.rows = k;
  spec.a = a;
  spec.b = b;
  spec.scale = s;
  spec.dropout = p;
  spec.dropout_key = 3;
  spec.label = "dropout test";
  AttachedLowRankAdapter attached = attach_low_rank_adapter(spec);
  Tensor x = ones({n, k}).set_requires_grad(true);
  set_low_rank_adapter_dropout_state(42, 0);
  const Tensor y = matmul(x, w, false, true);
  const std::vector<float> values = y.to_vector();
  int64_t dropped = 0;
  for (float v : values) {
    REQUIRE((v == 0.0f || std::abs(v - s / (1 - p)) < 1e-5));
    dropped += v == 0.0f ? 1 : 0;
  }
  const double rate = static_cast<double>(dropped) / static_cast<double>(values.size());
  CHECK(std::abs(rate - p) < 0.01);                 // binomial sd 0.0023 at 80k entries
  CHECK(std::abs(mean_of(values) - s) < 0.03 * s);  // E[drop(x)] = x
  // The gradient follows the same mask: dx = s · mask / (1 - p) (B = A = I).
  backward(sum(y));
  const std::vector<float> dx = x.grad().to_vector();
  for (size_t i = 0; i < dx.size(); ++i) REQUIRE(dx[i] == doctest::Approx(values[i]));
  // The same stream draws the same masks; another stream others.
  set_low_rank_adapter_dropout_state(42, 0);
  CHECK(matmul(x, w, false, true).to_vector() == values);
  set_low_rank_adapter_dropout_state(42, 1);
  CHECK(matmul(x, w, false, true).to_vector() != values);
  set_low_rank_adapter_dropout_state(43, 0);
  CHECK(matmul(x, w, false, true).to_vector() != values);
  {  // no gradient recorded (evaluation): no dropout
    NoGradGuard no_grad;
    for (float v : matmul(x, w, false, true).to_vector()) REQUIRE(v == doctest::Approx(s));
  }
  CHECK(attached.uses() >= 5);
}

TEST_CASE("uses the adapter cannot follow are refused, naming it") {
  Fixture f;
  const Tensor x = random_tensor({3, kIn}, 14);
  const Tensor xt = random_tensor({kIn, 3}, 15);
  CHECK_THROWS_WITH_AS(matmul(f.w, xt), doctest::Contains("'test q', 'test v'"), patchbay::Error);
  CHECK_THROWS_WITH_AS(matmul(f.w, xt), doctest::Contains("left operand"), patchbay::Error);
  CHECK_THROWS_WITH_AS(matmul(x.narrow(1, 0, 4), f.w.narrow(1, 0, 4), false, true),
                       doctest::Contains("x · W[rows]ᵀ"), patchbay::Error);  // a column range
  CHECK_THROWS_WITH_AS(matmul(random_tensor({3, kRows}, 16), f.w),
                       doctest::Contains("right operand"),
                       patchbay::Error);  // W read as [K, N] = x · W (not x · Wᵀ)
  CHECK_THROWS_WITH_AS(embedding(f.w, arange(0, 2)), doctest::Contains("an embedding lookup"),
                       patchbay::Error);
  CHECK_THROWS_WITH_AS(attach_low_rank_adapter(f.spec(2, f.a_q, f.b_q, 0.0, 5, "overlap")),
                       doctest::Contains("overlap"), patchbay::Error);
  CHECK_THROWS_WITH_AS(
      attach_low_rank_adapter(f.spec(2, f.a_q, random_tensor({4, 3}, 17), 0.0, 5, "bad B")),
      doctest::Contains("expected B [4, 2]"), patchbay::Error);
  f.q.reset();
  f.v.reset();
  CHECK_NOTHROW(matmul(f.w, xt));  // detached: a plain weight again
}

TEST_CASE("matmul's backward gives no gradient to an operand that does not require one") {
  const Tensor x = random_tensor({4, kIn}, 18).set_requires_grad(true);
  const Tensor w = random_tensor({kRows, kIn}, 19);  // frozen
  for (DType policy : {DType::kF32, DType::kBF16}) {
    AutocastGuard guard(policy);
    const Tensor y = matmul(x, w, false, true);
    const std::vector<Tensor> g = y.grad_fn()->apply({ones(y.shape())});
    REQUIRE(g.size() == 2);
    CHECK(g[0].defined());
    CHECK_FALSE(g[1].defined());
  }
}
