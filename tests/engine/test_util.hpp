// Helpers for engine tests: conversions between engine tensors and reference arrays, and a
// central finite-difference gradient check.
#pragma once

#include <doctest/doctest.h>

#include <cmath>
#include <functional>
#include <string>
#include <vector>

#include "engine/ops.hpp"
#include "engine/reference/reference.hpp"

namespace patchbay::engine::testing {

namespace ref = patchbay::engine::reference;

inline ref::Array to_array(const Tensor& t) {
  std::vector<float> v = t.to_vector();
  return ref::Array{t.shape(), ref::Values(v.begin(), v.end())};
}

inline Tensor random_tensor(const Shape& shape, uint64_t seed, double low = -1.0, double high = 1.0,
                            bool requires_grad = false) {
  Generator gen(seed);
  Tensor t = uniform(shape, gen, low, high);
  if (requires_grad) t.set_requires_grad(true);
  return t;
}

// max |a - b| / (atol + rtol |b|) <= 1 elementwise, with a message naming the worst element.
inline void check_close(const std::vector<double>& actual, const std::vector<double>& expected,
                        double rtol, double atol, const std::string& what) {
  REQUIRE_MESSAGE(actual.size() == expected.size(),
                  what << ": size " << actual.size() << " vs " << expected.size());
  double worst = 0.0;
  size_t worst_i = 0;
  for (size_t i = 0; i < actual.size(); ++i) {
    double diff = std::fabs(actual[i] - expected[i]);
    double ratio = diff == 0.0 ? 0.0 : diff / (atol + rtol * std::fabs(expected[i]));
    if (!(ratio <= worst)) {  // also catches NaN
      worst = std::isnan(ratio) ? 1e30 : ratio;
      worst_i = i;
    }
  }
  CHECK_MESSAGE(worst <= 1.0, what << ": element " << worst_i << " is " << actual[worst_i]
                                   << ", expected " << expected[worst_i] << " (rtol " << rtol
                                   << ", atol " << atol << ")");
}

inline void check_close(const Tensor& actual, const ref::Array& expected, double rtol, double atol,
                        const std::string& what) {
  CHECK_MESSAGE(actual.shape() == expected.shape, what << ": shape " << shape_str(actual.shape())
                                                       << " vs " << shape_str(expected.shape));
  std::vector<float> v = actual.to_vector();
  check_close(std::vector<double>(v.begin(), v.end()), expected.values, rtol, atol, what);
}

// Compares d(sum(f(x) * w))/dx from backward() with central differences (eps on each input
// element, evaluated in f32 with grad off). Inputs must be f32 leaves with requires_grad.
inline void check_gradients(const std::function<Tensor(const std::vector<Tensor>&)>& f,
                            std::vector<Tensor> inputs, const std::string& what, double eps = 1e-3,
                            double rtol = 1e-2, double atol = 1e-3) {
  Tensor out = f(inputs);
  Tensor weights = random_tensor(out.shape(), 12345, 0.5, 1.5);
  for (Tensor& x : inputs) x.zero_grad();
  backward(sum(mul(out, weights)));
  auto weighted_loss = [&]() {
    NoGradGuard no_grad;
    std::vector<float> o = f(inputs).to_vector(), w = weights.to_vector();
    double s = 0.0;
    for (size_t i = 0; i < o.size(); ++i) s += static_cast<double>(o[i]) * w[i];
    return s;
  };
  for (size_t k = 0; k < inputs.size(); ++k) {
    Tensor x = inputs[k];
    if (!x.requires_grad()) continue;
    REQUIRE_MESSAGE(x.grad().defined(), what << ": input " << k << " got no gradient");
    std::vector<float> analytic = x.grad().to_vector();
    std::vector<double> numeric(analytic.size());
    REQUIRE(x.is_contiguous());
    float* p = x.data<float>();
    for (size_t i = 0; i < analytic.size(); ++i) {
      float saved = p[i];
      p[i] = saved + static_cast<float>(eps);
      double up = weighted_loss();
      p[i] = saved - static_cast<float>(eps);
      double down = weighted_loss();
      p[i] = saved;
      numeric[i] = (up - down) / (2.0 * eps);
    }
    check_close(std::vector<double>(analytic.begin(), analytic.end()), numeric, rtol, atol,
                what + " d/d input " + std::to_string(k));
  }
}

}  // namespace patchbay::engine::testing
