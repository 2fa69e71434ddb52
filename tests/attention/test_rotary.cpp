// rotary_embedding (engine/ops_positional.hpp, pb_ops_table::rotary_embedding): forward
// against a plain double-precision reference written from the formula, the rotate-half
// convention pinned on a hand-computed case, norm preservation, position offsets, bf16
// within its rounding, backward against central finite differences, and argument errors.
#include <doctest/doctest.h>

#include <cmath>
#include <string>
#include <vector>

#include "common/error.hpp"
#include "engine/autograd.hpp"
#include "engine/ops.hpp"
#include "engine/ops_positional.hpp"
#include "engine/ops_table.hpp"
#include "patchbay/tensor.hpp"
#include "patchbay/testing/gradcheck.hpp"

namespace {

namespace eng = patchbay::engine;

// The formula of ops_positional.hpp, element by element in double: x [rows, T, D] flattened.
std::vector<double> rotary_reference(const std::vector<float>& x, int64_t steps, int64_t dim,
                                     int64_t offset, double theta) {
  std::vector<double> out(x.size());
  const int64_t half = dim / 2;
  for (size_t base = 0; base < x.size(); base += static_cast<size_t>(dim)) {
    const int64_t t = static_cast<int64_t>(base / static_cast<size_t>(dim)) % steps;
    for (int64_t i = 0; i < half; ++i) {
      const double angle =
          static_cast<double>(offset + t) *
          std::pow(theta, -2.0 * static_cast<double>(i) / static_cast<double>(dim));
      const double x1 = x[base + static_cast<size_t>(i)],
                   x2 = x[base + static_cast<size_t>(i + half)];
      out[base + static_cast<size_t>(i)] = x1 * std::cos(angle) - x2 * std::sin(angle);
      out[base + static_cast<size_t>(i + half)] = x2 * std::cos(angle) + x1 * std::sin(angle);
    }
  }
  return out;
}

double max_abs_diff(const std::vector<float>& a, const std::vector<double>& b) {
  REQUIRE(a.size() == b.size());
  double worst = 0;
  for (size_t i = 0; i < a.size(); ++i) worst = std::max(worst, std::fabs(a[i] - b[i]));
  return worst;
}

eng::Tensor random_tensor(const eng::Shape& shape, uint64_t seed) {
  eng::Generator gen(seed);
  return eng::uniform(shape, gen, -1.0, 1.0);
}

}  // namespace

TEST_CASE("rotary: rotate-half convention on a hand-computed case") {
  // D = 4, one position p = 1 (offset 1, T = 1), theta = 100: angles a0 = 1, a1 = 100^(-1/2) = 0.1.
  // Pairs are (x[0], x[2]) and (x[1], x[3]), not the adjacent (x[0], x[1]) of GPT-J.
  eng::Tensor x = eng::Tensor::from_vector({1.f, 0.f, 0.f, 2.f}, {1, 4});
  std::vector<float> y = eng::rotary_embedding(x, 1, 100.0).to_vector();
  CHECK(y[0] == doctest::Approx(std::cos(1.0)));         // x1 cos - x2 sin, x2 = 0
  CHECK(y[1] == doctest::Approx(-2.0 * std::sin(0.1)));  // x1 = 0, x2 = 2
  CHECK(y[2] == doctest::Approx(std::sin(1.0)));         // x2 cos + x1 sin
  CHECK(y[3] == doctest::Approx(2.0 * std::cos(0.1)));
}

TEST_CASE("rotary: forward matches the reference for shapes and offsets") {
  struct Case {
    eng::Shape shape;
    int64_t offset;
    double theta;
  };
  for (const Case& c : {Case{{2, 3, 5, 8}, 0, 10000.0}, Case{{1, 2, 7, 16}, 13, 10000.0},
                        Case{{3, 1, 4, 2}, 1000, 500.0}, Case{{4, 64}, 5, 10000.0},
                        Case{{2, 4, 33, 64}, 77, 1e6}}) {
    CAPTURE(eng::shape_str(c.shape));
    CAPTURE(c.offset);
    eng::Tensor x = random_tensor(c.shape, 7);
    std::vector<float> y = eng::rotary_embedding(x, c.offset, c.theta).to_vector();
    std::vector<double> expected = rotary_reference(x.to_vector(), c.shape[c.shape.size() - 2],
                                                    c.shape.back(), c.offset, c.theta);
    CHECK(max_abs_diff(y, expected) < 2e-6);
  }
}

TEST_CASE("rotary: position 0 is the identity; norms of each pair are preserved") {
  eng::Tensor x = random_tensor({2, 2, 6, 8}, 3);
  std::vector<float> xs = x.to_vector();
  std::vector<float> at_zero = eng::rotary_embedding(x.slice(2, 0, 1), 0, 10000.0).to_vector();
  std::vector<float> first = x.slice(2, 0, 1).to_vector();
  for (size_t i = 0; i < first.size(); ++i) CHECK(at_zero[i] == first[i]);
  std::vector<float> y = eng::rotary_embedding(x, 9, 10000.0).to_vector();
  for (size_t base = 0; base < xs.size(); base += 8) {
    for (size_t i = 0; i < 4; ++i) {
      const double before = std::hypot(xs[base + i], xs[base + i + 4]);
      const double after = std::hypot(y[base + i], y[base + i + 4]);
      CHECK(after == doctest::Approx(before).epsilon(1e-5));
    }
  }
}

TEST_CASE("rotary: a slice at offset p equals rows p.. of the whole sequence (KV-cache use)") {
  eng::Tensor x = random_tensor({1, 3, 10, 8}, 11);
  std::vector<float> whole = eng::rotary_embedding(x, 0, 10000.0).slice(2, 6, 10).to_vector();
  std::vector<float> tail = eng::rotary_embedding(x.slice(2, 6, 10), 6, 10000.0).to_vector();
  REQUIRE(whole.size() == tail.size());
  for (size_t i = 0; i < whole.size(); ++i) CHECK(tail[i] == whole[i]);
}

TEST_CASE("rotary: non-contiguous input and bf16 within bf16 rounding") {
  eng::Tensor x = random_tensor({2, 6, 3, 8}, 5).transpose(1, 2);  // [2, 3, 6, 8] strided
  REQUIRE(!x.is_contiguous());
  std::vector<double> expected = rotary_reference(x.contiguous().to_vector(), 6, 8, 2, 10000.0);
  CHECK(max_abs_diff(eng::rotary_embedding(x, 2, 10000.0).to_vector(), expected) < 2e-6);
  eng::Tensor xb = x.to(eng::DType::kBF16);
  eng::Tensor yb = eng::rotary_embedding(xb, 2, 10000.0);
  CHECK(yb.dtype() == eng::DType::kBF16);
  std::vector<double> expected_b = rotary_reference(xb.contiguous().to_vector(), 6, 8, 2, 10000.0);
  // |x| <= 1.5 after rotation; one bf16 rounding of the result is <= 2^-8 relative.
  CHECK(max_abs_diff(yb.to_vector(), expected_b) < 1.5 * std::ldexp(1.0, -8));
}

TEST_CASE("rotary: backward is the inverse rotation (finite differences)") {
  eng::Tensor x = random_tensor({2, 2, 5, 6}, 21);
  x.set_requires_grad(true);
  eng::Tensor w = random_tensor({2, 2, 5, 6}, 22);
  eng::Tensor loss = eng::sum(eng::rotary_embedding(x, 3, 10000.0) * w);
  eng::backward(loss);
  std::vector<float> analytic = x.grad().to_vector();
  // The gradient of sum(R x * w) is R^T w: the inverse rotation of w.
  std::vector<float> ws = w.to_vector();
  {
    std::vector<double> inverse(ws.size());
    const std::vector<double> forward = rotary_reference(ws, 5, 6, 3, 10000.0);
    // R^T w: rotate w by -a, i.e. apply the formula with sin negated.
    for (size_t base = 0; base < ws.size(); base += 6) {
      const int64_t t = static_cast<int64_t>(base / 6) % 5;
      for (int64_t i = 0; i < 3; ++i) {
        const double a =
            static_cast<double>(3 + t) * std::pow(10000.0, -2.0 * static_cast<double>(i) / 6.0);
        const double w1 = ws[base + static_cast<size_t>(i)],
                     w2 = ws[base + static_cast<size_t>(i + 3)];
        inverse[base + static_cast<size_t>(i)] = w1 * std::cos(a) + w2 * std::sin(a);
        inverse[base + static_cast<size_t>(i + 3)] = w2 * std::cos(a) - w1 * std::sin(a);
      }
    }
    CHECK(max_abs_diff(analytic, inverse) < 2e-6);
    CHECK(max_abs_diff(analytic, forward) > 1e-2);  // the forward rotation would be wrong
  }
  // Central differences through the SDK gradcheck (via the ops table), second order too.
  const pb_ops_table* ops = eng::host_ops_table();
  REQUIRE(PB_HAS_FIELD(ops, pb_ops_table, rotary_embedding));
  patchbay::Ops make(ops);
  patchbay::Generator gen(ops, 4);
  patchbay::Tensor input = make.uniform({1, 2, 4, 8}, gen, -1, 1);
  input.requires_grad(true);
  auto rotary = [ops](const patchbay::Tensor& t, int64_t offset) {
    pb_tensor* out = nullptr;
    patchbay::check_ops_status(ops, ops->rotary_embedding(t.handle(), offset, 10000.0, &out),
                               "rotary");
    return patchbay::Tensor(ops, out);
  };
  patchbay::testing::GradcheckResult r = patchbay::testing::gradcheck(
      ops, [&](const std::vector<patchbay::Tensor>& in) { return rotary(in[0], 17) * in[0]; },
      {input});
  CHECK_MESSAGE(r.ok, r.message);
}

TEST_CASE("rotary: argument errors name the op and the problem") {
  auto message_of = [](auto&& call) -> std::string {
    try {
      call();
    } catch (const patchbay::Error& e) {
      return e.what();
    }
    return "";
  };
  eng::Tensor odd = random_tensor({2, 3, 5}, 1);
  CHECK(message_of([&] { eng::rotary_embedding(odd, 0, 10000.0); }).find("even head dim") !=
        std::string::npos);
  eng::Tensor x = random_tensor({2, 3, 4}, 1);
  CHECK(message_of([&] { eng::rotary_embedding(x, -1, 10000.0); }).find("position_offset") !=
        std::string::npos);
  CHECK(message_of([&] { eng::rotary_embedding(x, 0, 0.0); }).find("theta") != std::string::npos);
  eng::Tensor ids = eng::arange(0, 8).reshape({2, 4});
  CHECK(message_of([&] { eng::rotary_embedding(ids, 0, 10000.0); }).find("float") !=
        std::string::npos);
  const pb_ops_table* ops = eng::host_ops_table();
  pb_tensor* out = nullptr;
  pb_status* st = ops->rotary_embedding(nullptr, 0, 10000.0, &out);
  REQUIRE(st != nullptr);
  CHECK(ops->status_code(st) == PB_STATUS_INVALID_ARGUMENT);
  CHECK(out == nullptr);
  ops->status_free(st);
}
