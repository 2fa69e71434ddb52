// CPU tests of the device-independent math of kernels/cuda: GELU (tanh and erf) against known
// values and their derivatives against central finite differences; Welford's running and
// merged statistics against two-pass mean and variance; the online-softmax merge against a
// direct logsumexp, -inf entries included.
#include <doctest.h>

#include <cmath>
#include <random>
#include <vector>

#include "patchbay/kernels/cuda/math/gelu.hpp"
#include "patchbay/kernels/cuda/math/online_softmax.hpp"
#include "patchbay/kernels/cuda/math/unary.hpp"
#include "patchbay/kernels/cuda/math/welford.hpp"

namespace math = patchbay::kernels::cuda::math;

TEST_CASE("GELU known values (tanh approximation and erf form)") {
  CHECK(math::gelu_tanh(1.0) == doctest::Approx(0.8411919906082768).epsilon(1e-14));
  CHECK(math::gelu_erf(1.0) == doctest::Approx(0.8413447460685429).epsilon(1e-14));
  CHECK(math::gelu_erf(-1.0) == doctest::Approx(-0.15865525393145707).epsilon(1e-13));
  CHECK(math::gelu_tanh(0.0) == 0.0);
  CHECK(math::gelu_tanh(10.0f) == doctest::Approx(10.0f));
  CHECK(std::fabs(math::gelu_tanh(-10.0f)) < 1e-6f);
}

TEST_CASE("GELU derivatives match central finite differences; float tracks double") {
  for (const math::Activation kind : {math::Activation::kGeluTanh, math::Activation::kGeluErf}) {
    for (double x = -6.0; x <= 6.0; x += 0.173) {
      const double h = 1e-5;
      const double numeric = (math::activate(kind, x + h) - math::activate(kind, x - h)) / (2 * h);
      const double analytic = math::activate_derivative(kind, x);
      CHECK(analytic == doctest::Approx(numeric).epsilon(1e-7).scale(1.0));
      const float xf = static_cast<float>(x);
      CHECK(double(math::activate(kind, xf)) ==
            doctest::Approx(math::activate(kind, double(xf))).epsilon(1e-6).scale(1.0));
      CHECK(double(math::activate_derivative(kind, xf)) ==
            doctest::Approx(math::activate_derivative(kind, double(xf))).epsilon(1e-6).scale(1.0));
    }
  }
  CHECK(math::activate_derivative(math::Activation::kRelu, 2.0) == 1.0);
  CHECK(math::activate_derivative(math::Activation::kRelu, -2.0) == 0.0);
}

TEST_CASE("Welford: running and merged statistics equal two-pass mean and variance") {
  std::mt19937 generator(7);
  std::normal_distribution<double> normal(1000.0, 3.0);  // large mean: naive sum-of-squares fails
  std::vector<double> values(1000);
  for (auto& v : values) v = normal(generator);
  double mean = 0;
  for (double v : values) mean += v;
  mean /= double(values.size());
  double m2 = 0;
  for (double v : values) m2 += (v - mean) * (v - mean);
  const double variance = m2 / double(values.size());

  math::WelfordState<double> whole;
  for (double v : values) whole = math::welford_add(whole, v);
  CHECK(whole.mean == doctest::Approx(mean).epsilon(1e-12));
  CHECK(math::welford_variance(whole) == doctest::Approx(variance).epsilon(1e-10));

  // Uneven parts merged in a tree, as warp and block reductions do; an empty part included.
  const size_t cuts[] = {0, 1, 130, 130, 517, 999, 1000};
  std::vector<math::WelfordState<double>> parts;
  for (size_t c = 0; c + 1 < std::size(cuts); ++c) {
    math::WelfordState<double> part;
    for (size_t i = cuts[c]; i < cuts[c + 1]; ++i) part = math::welford_add(part, values[i]);
    parts.push_back(part);
  }
  while (parts.size() > 1) {
    std::vector<math::WelfordState<double>> next;
    for (size_t i = 0; i < parts.size(); i += 2)
      next.push_back(i + 1 < parts.size() ? math::welford_merge(parts[i], parts[i + 1]) : parts[i]);
    parts = next;
  }
  CHECK(parts[0].count == 1000.0);
  CHECK(parts[0].mean == doctest::Approx(mean).epsilon(1e-12));
  CHECK(math::welford_variance(parts[0]) == doctest::Approx(variance).epsilon(1e-10));

  // In float, Welford keeps the variance where E[x^2] - E[x]^2 loses it.
  math::WelfordState<float> single;
  for (double v : values) single = math::welford_add(single, float(v));
  CHECK(double(math::welford_variance(single)) == doctest::Approx(variance).epsilon(1e-3));
  CHECK(math::welford_variance(math::WelfordState<float>{}) == 0.0f);
}

TEST_CASE("online softmax: add and merge give the direct logsumexp; -inf contributes nothing") {
  std::mt19937 generator(11);
  std::uniform_real_distribution<double> uniform(-30.0, 30.0);
  std::vector<double> values(257);
  for (auto& v : values) v = uniform(generator);
  values[5] = -INFINITY;
  double max = -INFINITY;
  for (double v : values) max = std::max(max, v);
  double sum = 0;
  for (double v : values) sum += std::exp(v - max);
  const double direct = max + std::log(sum);

  math::SoftmaxState<double> running;
  for (double v : values) running = math::softmax_add(running, v);
  CHECK(math::softmax_logsumexp(running) == doctest::Approx(direct).epsilon(1e-13));

  math::SoftmaxState<double> left, right, empty;
  for (size_t i = 0; i < values.size(); ++i)
    (i % 3 == 0 ? left : right) = math::softmax_add(i % 3 == 0 ? left : right, values[i]);
  const auto merged = math::softmax_merge(math::softmax_merge(left, empty), right);
  CHECK(math::softmax_logsumexp(merged) == doctest::Approx(direct).epsilon(1e-13));
  CHECK(math::softmax_logsumexp(math::softmax_merge(empty, right)) ==
        math::softmax_logsumexp(right));

  math::SoftmaxState<float> all_masked;
  all_masked = math::softmax_add(all_masked, -INFINITY);
  all_masked = math::softmax_merge(all_masked, math::SoftmaxState<float>{});
  CHECK(all_masked.sum == 0.0f);
  CHECK(math::softmax_logsumexp(all_masked) == -INFINITY);
  CHECK_FALSE(std::isnan(math::softmax_merge(all_masked, all_masked).sum));
}

TEST_CASE("unary ops: derivatives match central finite differences (in double around f32)") {
  namespace m = patchbay::kernels::cuda::math;
  for (int op = 0; op <= int(m::UnaryOp::kPowScalar); ++op) {
    const auto unary = static_cast<m::UnaryOp>(op);
    for (const float x : {0.3f, 0.9f, 1.7f, 2.5f}) {  // positive: log, sqrt, rsqrt, pow defined
      const float h = 1e-3f;
      const double numeric =
          (double(m::unary_value(unary, 1.5f, x + h)) - m::unary_value(unary, 1.5f, x - h)) /
          (double(x + h) - double(x - h));
      INFO("op " << op << " at " << x);
      CHECK(m::unary_derivative(unary, 1.5f, x) ==
            doctest::Approx(numeric).epsilon(2e-3).scale(1.0));
    }
  }
  CHECK(m::unary_value(m::UnaryOp::kGeluTanh, 0.0f, 1.0f) == doctest::Approx(0.8411920f));
  CHECK(m::unary_value(m::UnaryOp::kSilu, 0.0f, 0.0f) == 0.0f);
}
