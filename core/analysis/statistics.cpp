// Statistics for `patchbay compare`; see statistics.hpp.
#include "analysis/statistics.hpp"

#include <algorithm>
#include <boost/math/distributions/students_t.hpp>
#include <cmath>
#include <limits>
#include <random>

#include "common/error.hpp"

namespace patchbay::analysis {
namespace {

constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();

double two_sided_p(double t, double df) {
  if (!std::isfinite(t) || !(df > 0)) return kNaN;
  const boost::math::students_t_distribution<double> distribution(df);
  return 2.0 * boost::math::cdf(boost::math::complement(distribution, std::fabs(t)));
}

double sample_variance(const std::vector<double>& values) {
  if (values.size() < 2) return kNaN;
  const double m = mean(values);
  double sum = 0;
  for (double v : values) sum += (v - m) * (v - m);
  return sum / static_cast<double>(values.size() - 1);
}

}  // namespace

double mean(const std::vector<double>& values) {
  if (values.empty()) return kNaN;
  double sum = 0;
  for (double v : values) sum += v;
  return sum / static_cast<double>(values.size());
}

double sample_std(const std::vector<double>& values) { return std::sqrt(sample_variance(values)); }

Interval bootstrap_mean_interval(const std::vector<double>& values, double level, int resamples,
                                 uint64_t seed) {
  if (values.empty()) return {kNaN, kNaN};
  if (values.size() == 1) return {values[0], values[0]};
  std::mt19937_64 generator(seed);
  std::uniform_int_distribution<size_t> pick(0, values.size() - 1);
  std::vector<double> means(static_cast<size_t>(resamples));
  for (double& m : means) {
    double sum = 0;
    for (size_t i = 0; i < values.size(); ++i) sum += values[pick(generator)];
    m = sum / static_cast<double>(values.size());
  }
  std::sort(means.begin(), means.end());
  auto quantile = [&](double q) {
    const double position = q * static_cast<double>(means.size() - 1);
    const size_t below = static_cast<size_t>(std::floor(position));
    const size_t above = std::min(below + 1, means.size() - 1);
    return means[below] + (position - static_cast<double>(below)) * (means[above] - means[below]);
  };
  return {quantile((1 - level) / 2), quantile((1 + level) / 2)};
}

TTest welch_t_test(const std::vector<double>& a, const std::vector<double>& b) {
  if (a.size() < 2 || b.size() < 2) return {kNaN, kNaN, kNaN};
  const double va = sample_variance(a) / static_cast<double>(a.size());
  const double vb = sample_variance(b) / static_cast<double>(b.size());
  TTest test;
  test.t = (mean(a) - mean(b)) / std::sqrt(va + vb);
  test.degrees_of_freedom =
      (va + vb) * (va + vb) /
      (va * va / static_cast<double>(a.size() - 1) + vb * vb / static_cast<double>(b.size() - 1));
  test.p_value = two_sided_p(test.t, test.degrees_of_freedom);
  return test;
}

TTest paired_t_test(const std::vector<double>& a, const std::vector<double>& b) {
  if (a.size() != b.size())
    throw Error(ErrorKind::kInvalidArgument,
                "a paired t-test needs two samples of the same length");
  if (a.size() < 2) return {kNaN, kNaN, kNaN};
  std::vector<double> differences(a.size());
  for (size_t i = 0; i < a.size(); ++i) differences[i] = a[i] - b[i];
  TTest test;
  test.t = mean(differences) / (sample_std(differences) / std::sqrt(static_cast<double>(a.size())));
  test.degrees_of_freedom = static_cast<double>(a.size() - 1);
  test.p_value = two_sided_p(test.t, test.degrees_of_freedom);
  return test;
}

}  // namespace patchbay::analysis
