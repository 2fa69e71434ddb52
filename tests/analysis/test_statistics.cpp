// Statistics of `patchbay compare` against hand-computed values: mean, sample std, Welch's
// and the paired t-test (t, degrees of freedom; p from numerically integrating the t density
// in a few lines of Python), and the bootstrap interval's basic properties.
#include <doctest/doctest.h>

#include <cmath>

#include "analysis/statistics.hpp"

using namespace patchbay::analysis;

TEST_CASE("mean and sample standard deviation") {
  const std::vector<double> a = {3.10, 3.25, 3.05, 3.30};
  CHECK(mean(a) == doctest::Approx(3.175).epsilon(1e-12));
  CHECK(sample_std(a) == doctest::Approx(0.11902380714238081).epsilon(1e-10));
  CHECK(std::isnan(sample_std({1.0})));
}

TEST_CASE("Welch's t-test on a small set") {
  const std::vector<double> a = {3.10, 3.25, 3.05, 3.30}, b = {3.40, 3.35, 3.60, 3.45, 3.50};
  const TTest test = welch_t_test(a, b);
  CHECK(test.t == doctest::Approx(-3.881354788250108).epsilon(1e-9));
  CHECK(test.degrees_of_freedom == doctest::Approx(5.771582072540766).epsilon(1e-9));
  CHECK(test.p_value == doctest::Approx(0.008798568753096259).epsilon(1e-6));
}

TEST_CASE("paired t-test, and closed forms for 1 and 2 degrees of freedom") {
  const TTest test = paired_t_test({1.0, 1.2, 0.9, 1.1}, {1.1, 1.25, 1.05, 1.2});
  CHECK(test.t == doctest::Approx(-4.8989794855663575).epsilon(1e-9));
  CHECK(test.degrees_of_freedom == 3);
  CHECK(test.p_value == doctest::Approx(0.01627660345943427).epsilon(1e-6));
  // df = 1 (Cauchy): p = 1 - 2 atan(|t|) / pi. Differences {1, 3}: t = 2 / (sqrt(2)/sqrt(2)) = 2.
  const TTest one = paired_t_test({1.0, 3.0}, {0.0, 0.0});
  CHECK(one.t == doctest::Approx(2.0));
  CHECK(one.p_value == doctest::Approx(1.0 - 2.0 * std::atan(2.0) / M_PI).epsilon(1e-10));
  // df = 2: p = 1 - |t| / sqrt(2 + t^2). Differences {1, 2, 3}: t = 2 / (1 / sqrt 3) = 2 sqrt 3.
  const TTest two = paired_t_test({1.0, 2.0, 3.0}, {0.0, 0.0, 0.0});
  const double t = 2.0 * std::sqrt(3.0);
  CHECK(two.p_value == doctest::Approx(1.0 - t / std::sqrt(2.0 + t * t)).epsilon(1e-10));
  CHECK(std::isnan(welch_t_test({1.0}, {2.0, 3.0}).p_value));
}

TEST_CASE("bootstrap interval of the mean: contains the mean, reproducible, narrows with n") {
  const std::vector<double> a = {3.10, 3.25, 3.05, 3.30, 3.2, 3.15};
  const Interval i = bootstrap_mean_interval(a, 0.95, 4000, 7);
  CHECK(i.low < mean(a));
  CHECK(i.high > mean(a));
  CHECK(i.low >= 3.05);
  CHECK(i.high <= 3.30);
  const Interval again = bootstrap_mean_interval(a, 0.95, 4000, 7);
  CHECK(again.low == i.low);
  std::vector<double> many;
  for (int k = 0; k < 8; ++k) many.insert(many.end(), a.begin(), a.end());
  const Interval narrow = bootstrap_mean_interval(many, 0.95, 4000, 7);
  CHECK(narrow.high - narrow.low < 0.6 * (i.high - i.low));
}
