// bf16 mixed precision (engine/autocast.hpp): under a bf16 policy an f32 matmul is exactly
// the product of the bf16-rounded operands accumulated in f32 (known answer against a
// double reference on rounded operands); its gradients are f32 and within the bound that
// bf16 rounding of A, B and dC implies of the f32 gradients, and of central finite
// differences of the f32 function; parameters' bf16 copies are cached per scope and dropped
// when the scope ends; the policy is reachable through the C ops table (version 6).
#include <doctest/doctest.h>

#include <cmath>
#include <vector>

#include "common/error.hpp"
#include "engine/ops.hpp"
#include "engine/ops_table.hpp"
#include "test_util.hpp"

using namespace patchbay::engine;
using namespace patchbay::engine::testing;

namespace {

// Unit roundoff of bf16 (8 significant bits, round to nearest): |round(x) - x| <= u |x|.
const double kBf16Unit = std::ldexp(1.0, -9);

Tensor rounded(const Tensor& x) { return x.detach().to(DType::kBF16).to(DType::kF32); }

// |x| elementwise as a double-precision-free f32 tensor (for error bounds: sum |a||b|).
Tensor magnitude(const Tensor& x) { return abs(x.detach()); }

// Checks |actual - expected| <= bound elementwise (all f32 tensors of one shape).
void check_within(const Tensor& actual, const Tensor& expected, const Tensor& bound,
                  const std::string& what) {
  REQUIRE(actual.shape() == expected.shape());
  const std::vector<float> a = actual.to_vector(), e = expected.to_vector(), b = bound.to_vector();
  size_t worst = 0;
  double worst_ratio = 0;
  for (size_t i = 0; i < a.size(); ++i) {
    const double ratio =
        std::fabs(static_cast<double>(a[i]) - e[i]) / (static_cast<double>(b[i]) + 1e-30);
    if (!(ratio <= worst_ratio)) {
      worst_ratio = std::isnan(ratio) ? 1e30 : ratio;
      worst = i;
    }
  }
  CHECK_MESSAGE(worst_ratio <= 1.0, what << ": element " << worst << " is " << a[worst]
                                         << ", expected " << e[worst] << " within " << b[worst]);
}

}  // namespace

TEST_CASE(
    "autocast bf16: an f32 matmul is the f32-accumulated product of the bf16-rounded operands") {
  for (bool ta : {false, true})
    for (bool tb : {false, true}) {
      CAPTURE(ta);
      CAPTURE(tb);
      const int64_t m = 7, k = 96, n = 33;
      Tensor a = random_tensor(ta ? Shape{k, m} : Shape{m, k}, 1);
      Tensor b = random_tensor(tb ? Shape{n, k} : Shape{k, n}, 2);
      Tensor out;
      {
        AutocastGuard bf16(DType::kBF16);
        out = matmul(a, b, ta, tb);
      }
      CHECK(out.dtype() == DType::kF32);
      // Reference in double on the rounded operands: what is left is f32 accumulation,
      // |err| <= k * 2^-24 * sum |a||b| <= k * 2^-24 * k (entries in [-1, 1]).
      const ref::Array expected = ref::matmul(to_array(rounded(a)), to_array(rounded(b)), ta, tb);
      check_close(out, expected, 0.0, static_cast<double>(k * k) * std::ldexp(1.0, -24),
                  "autocast matmul");
      // ... and it is not the f32 product: the rounding of the operands shows (a property that
      // fails if the policy were ignored).
      const std::vector<float> plain = matmul(a, b, ta, tb).to_vector(), mixed = out.to_vector();
      double max_diff = 0;
      for (size_t i = 0; i < plain.size(); ++i)
        max_diff = std::max(max_diff, std::fabs(double(plain[i]) - mixed[i]));
      CHECK(max_diff > 1e-4);
    }
}

TEST_CASE(
    "autocast bf16: gradients are f32 and within the bf16 rounding bound of the f32 gradients") {
  // [2, 5, K] x [N, K]^T (a linear layer on a batch: the stacked-rows path) and a batched
  // product with a broadcast operand ([2, 3, M, K] x [K, N]).
  struct Case {
    Shape a, b;
    bool tb;
  };
  for (const Case& c : {Case{{2, 5, 64}, {24, 64}, true}, Case{{2, 3, 6, 40}, {40, 12}, false}}) {
    CAPTURE(shape_str(c.a));
    Tensor a = random_tensor(c.a, 3, -1, 1, true), b = random_tensor(c.b, 4, -1, 1, true);
    Tensor out32 = matmul(a, b, false, c.tb);
    Tensor dc = random_tensor(out32.shape(), 5, 0.5, 1.5);
    backward(sum(mul(out32, dc)));
    const Tensor da32 = a.grad(), db32 = b.grad();
    a.zero_grad();
    b.zero_grad();
    {
      AutocastGuard bf16(DType::kBF16);
      backward(sum(mul(matmul(a, b, false, c.tb), dc)));
    }
    REQUIRE(a.grad().dtype() == DType::kF32);
    REQUIRE(b.grad().dtype() == DType::kF32);
    // Each term dC*B of dA is formed from three bf16 roundings (dC, B; A for dB): relative
    // error <= 3u + 3u^2 per term, so |dA - dA32| <= (3u + 3u^2) sum |dC||B| + f32 accumulation
    // (both sides, 2 * K * 2^-24 * sum |dC||B|). Bound with 3.1u + 64 * 2^-23 relative.
    const double rel = 3.1 * kBf16Unit + 64 * std::ldexp(1.0, -23);
    const Tensor bound_a = mul_scalar(matmul(magnitude(dc), magnitude(b), false, !c.tb), rel);
    Tensor bound_b = matmul(magnitude(a), magnitude(dc), true, false);  // [.., K, N]
    if (c.tb) bound_b = transpose(bound_b, -1, -2);
    bound_b = mul_scalar(sum_to_shape(bound_b, b.shape()), rel);
    check_within(a.grad(), da32, bound_a, "dA");
    check_within(b.grad(), db32, bound_b, "dB");
    // Not the f32 gradient itself: dC, A and B were rounded.
    CHECK(max(abs(sub(a.grad(), da32))).item() > 0.0);
  }
}

TEST_CASE("autocast bf16: gradients match central finite differences of the f32 product") {
  // The finite differences run in f32 outside the policy (inside it, a small step would
  // vanish in the bf16 rounding of the operands). The loss is linear in each operand, so a
  // central difference is exact for any step: a large one (0.25) keeps the f32 evaluation
  // error small (<= 1e-3 here). The tolerance is the bf16 bound above: 3.1u relative per
  // term, at most 5 terms (dA sums over N = 5, dB over M = 4) of size <= 1.5.
  Tensor a = random_tensor({4, 16}, 6, -1, 1, true), b = random_tensor({16, 5}, 7, -1, 1, true);
  Tensor w = random_tensor({4, 5}, 8, 0.5, 1.5);
  {
    AutocastGuard bf16(DType::kBF16);
    backward(sum(mul(matmul(a, b), w)));
  }
  auto loss = [&](const Tensor& x, const Tensor& y) {
    NoGradGuard no_grad;
    const std::vector<float> o = matmul(x, y).to_vector(), wv = w.to_vector();
    double s = 0;
    for (size_t i = 0; i < o.size(); ++i) s += double(o[i]) * wv[i];
    return s;
  };
  const double eps = 0.25, tol = 3.1 * kBf16Unit * 5 * 1.5 + 2e-3;
  for (int which = 0; which < 2; ++which) {
    Tensor x = which == 0 ? a : b;
    const std::vector<float> analytic = x.grad().to_vector();
    for (int64_t i = 0; i < x.numel(); ++i) {
      std::vector<float> plus = x.to_vector(), minus = plus;
      plus[static_cast<size_t>(i)] += static_cast<float>(eps);
      minus[static_cast<size_t>(i)] -= static_cast<float>(eps);
      const Tensor xp = Tensor::from_vector(plus, x.shape()),
                   xm = Tensor::from_vector(minus, x.shape());
      const double fd = which == 0 ? (loss(xp, b) - loss(xm, b)) / (2 * eps)
                                   : (loss(a, xp) - loss(a, xm)) / (2 * eps);
      CHECK_MESSAGE(std::fabs(fd - analytic[static_cast<size_t>(i)]) <= tol,
                    (which == 0 ? "dA" : "dB")
                        << "[" << i << "] " << analytic[static_cast<size_t>(i)] << " vs " << fd);
    }
  }
}

TEST_CASE("autocast bf16: a view of a parameter reads the same view of its cached copy") {
  // As attention_dense's q/k/v matmuls on row slices of qkv.weight: the slices use the one
  // cached bf16 copy (an in-place write inside the scope is not seen: the copy was reused),
  // with the values of rounding the slice itself, and gradients reach the parameter.
  Tensor w = random_tensor({24, 16}, 11, -1, 1, true);
  Tensor x = random_tensor({4, 16}, 12);
  Tensor first, stale, reference;
  {
    AutocastGuard bf16(DType::kBF16);
    first = matmul(x, w.slice(0, 8, 16), false, true);  // [4, 8]: rows 8..15 of w
    copy_(w, mul_scalar(w.detach(), 2.0));
    stale = matmul(x, w.slice(0, 8, 16), false, true);
  }
  CHECK(max(abs(sub(stale, first))).item() == 0.0);
  {
    AutocastGuard bf16(DType::kBF16);  // a new scope: the write is seen, through the view
    reference = matmul(x, w.detach().slice(0, 8, 16).contiguous(), false, true);
    Tensor viewed = matmul(x, w.slice(0, 8, 16), false, true);
    CHECK(max(abs(sub(viewed, reference))).item() == 0.0);
    backward(sum(viewed));
  }
  REQUIRE(w.grad().defined());
  const std::vector<float> g = w.grad().to_vector();
  for (int64_t r = 0; r < 24; ++r) {
    bool zero = true;
    for (int64_t c = 0; c < 16; ++c) zero = zero && g[static_cast<size_t>(r * 16 + c)] == 0.f;
    CHECK_MESSAGE(zero == (r < 8 || r >= 16), "row " << r);
  }
}

TEST_CASE("autocast bf16: a parameter's bf16 copy is made once per scope and dropped with it") {
  Tensor w = random_tensor({16, 16}, 9, -1, 1, true);
  Tensor x = random_tensor({4, 16}, 10);
  Tensor first, second, stale;
  {
    AutocastGuard bf16(DType::kBF16);
    first = matmul(x, w);
    // an in-place write inside the scope is not seen until the cache is dropped...
    copy_(w, mul_scalar(w.detach(), 2.0));
    stale = matmul(x, w);
    autocast_clear_cache();
    second = matmul(x, w);
  }
  CHECK(max(abs(sub(stale, first))).item() == 0.0);
  check_close(second, to_array(mul_scalar(first, 2.0)), 0.0, 1e-5, "after autocast_clear_cache");
  // ... and a new scope starts with an empty cache.
  copy_(w, mul_scalar(w.detach(), 0.5));
  Tensor third;
  {
    AutocastGuard bf16(DType::kBF16);
    third = matmul(x, w);
  }
  check_close(third, to_array(first), 0.0, 1e-5, "a new scope");
  CHECK(autocast_dtype() == DType::kF32);
}

TEST_CASE("autocast: bf16 operands keep their own path, guards nest and bad dtypes are refused") {
  Tensor a = random_tensor({3, 8}, 11).to(DType::kBF16),
         b = random_tensor({8, 4}, 12).to(DType::kBF16);
  {
    AutocastGuard outer(DType::kBF16);
    CHECK(matmul(a, b).dtype() == DType::kBF16);
    {
      AutocastGuard inner(DType::kF32);
      CHECK(autocast_dtype() == DType::kF32);
      Tensor x = random_tensor({3, 8}, 13), y = random_tensor({8, 4}, 14);
      check_close(matmul(x, y), ref::matmul(to_array(x), to_array(y), false, false), 1e-5, 1e-5,
                  "f32 inside");
    }
    CHECK(autocast_dtype() == DType::kBF16);
  }
  CHECK(autocast_dtype() == DType::kF32);
  CHECK_THROWS_WITH_AS(set_autocast_dtype(DType::kF16), doctest::Contains("f32 (off) or bf16"),
                       patchbay::Error);
}

TEST_CASE("autocast through the C ops table (version 6)") {
  const pb_ops_table* t = host_ops_table();
  REQUIRE(PB_HAS_FIELD(t, pb_ops_table, autocast_clear_cache));
  CHECK(t->version >= 6);
  CHECK(t->autocast_dtype() == PB_DTYPE_F32);
  pb_dtype previous = PB_DTYPE_I64;
  REQUIRE(t->set_autocast_dtype(PB_DTYPE_BF16, &previous) == nullptr);
  CHECK(previous == PB_DTYPE_F32);
  CHECK(autocast_dtype() == DType::kBF16);
  t->autocast_clear_cache();
  pb_status* bad = t->set_autocast_dtype(PB_DTYPE_I32, nullptr);
  REQUIRE(bad != nullptr);
  CHECK(t->status_code(bad) == PB_STATUS_INVALID_ARGUMENT);
  t->status_free(bad);
  CHECK(t->autocast_dtype() == PB_DTYPE_BF16);
  REQUIRE(t->set_autocast_dtype(PB_DTYPE_F32, nullptr) == nullptr);
  CHECK(autocast_dtype() == DType::kF32);
}
