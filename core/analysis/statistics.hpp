// Statistics over seeds for `patchbay compare`: mean, sample standard deviation, a
// percentile-bootstrap confidence interval of the mean, and two-sided t-tests (Welch's
// unequal-variance test, and the paired test when two groups share their seeds). The t
// distribution comes from Boost.Math (boost::math::students_t), not hand-written functions.
#pragma once

#include <cstdint>
#include <vector>

namespace patchbay::analysis {

double mean(const std::vector<double>& values);
// Sample standard deviation (n - 1 in the denominator); NaN when n < 2.
double sample_std(const std::vector<double>& values);

struct Interval {
  double low = 0;
  double high = 0;
};
// Percentile bootstrap of the mean: `resamples` resamples with replacement drawn by a
// mt19937_64 seeded with `seed` (so reports are reproducible); the (1-level)/2 and
// (1+level)/2 quantiles of the resampled means. n = 1 gives [x, x].
Interval bootstrap_mean_interval(const std::vector<double>& values, double level = 0.95,
                                 int resamples = 10000, uint64_t seed = 20240601);

struct TTest {
  double t = 0;
  double degrees_of_freedom = 0;
  double p_value = 0;  // two-sided; NaN when the test is undefined (n < 2, zero variance)
};
// Welch's t-test of mean(a) - mean(b) (Welch-Satterthwaite degrees of freedom).
TTest welch_t_test(const std::vector<double>& a, const std::vector<double>& b);
// Paired t-test on a[i] - b[i] (equal lengths, same seed order).
TTest paired_t_test(const std::vector<double>& a, const std::vector<double>& b);

}  // namespace patchbay::analysis
