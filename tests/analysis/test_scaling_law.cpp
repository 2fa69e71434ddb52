// The Chinchilla fit recovers known constants from losses generated from them, and the
// compute-optimal allocations match the known answers (REFERENCES.md 2.4).
#include <doctest/doctest.h>

#include <cmath>

#include "analysis/scaling_law.hpp"

using namespace patchbay::analysis;

TEST_CASE("compute-optimal allocation: Chinchilla's published constants at the Gopher budget") {
  const Allocation r = compute_optimal(published_law("chinchilla"), 5.76e23);
  CHECK(r.parameters == doctest::Approx(3.219e10).epsilon(2e-3));
  CHECK(r.tokens == doctest::Approx(2.982e12).epsilon(2e-3));
  CHECK(6 * r.parameters * r.tokens == doctest::Approx(5.76e23).epsilon(1e-9));
  CHECK(published_law("chinchilla").a() == doctest::Approx(0.4516).epsilon(1e-3));
  const Allocation unrounded = compute_optimal(published_law("chinchilla-unrounded"), 5.76e23);
  CHECK(unrounded.parameters == doctest::Approx(4.036e10).epsilon(2e-3));
  const Allocation epoch = compute_optimal(published_law("epoch"), 5.76e23);
  CHECK(epoch.parameters == doctest::Approx(7.225e10).epsilon(3e-3));
  CHECK(published_law("chinchilla").loss(70e9, 1.4e12) == doctest::Approx(1.9366).epsilon(1e-4));
}

TEST_CASE("Kaplan's allocation and L(N)") {
  const Allocation r = kaplan_compute_optimal(5.76e23);
  CHECK(r.parameters == doctest::Approx(8.04e11).epsilon(3e-3));
  CHECK(r.tokens == doctest::Approx(2.16e11).epsilon(3e-3));
  CHECK(kaplan_loss_of_parameters(1e9) == doctest::Approx(2.3756).epsilon(1e-4));
}

TEST_CASE("the fit recovers known constants within 1%") {
  const ChinchillaLaw truth{1.8, 300.0, 900.0, 0.32, 0.29};
  std::vector<ScalingPoint> points;
  for (double n : {1e6, 3e6, 1e7, 3e7, 1e8, 3e8})
    for (double d : {1e8, 3e8, 1e9, 3e9, 1e10}) points.push_back({n, d, truth.loss(n, d), ""});
  FitOptions options;
  options.bootstrap_resamples = 4;
  const ScalingFit fit = fit_chinchilla(points, options);
  CHECK(fit.starts == 4500);
  CHECK(fit.law.E == doctest::Approx(truth.E).epsilon(0.01));
  CHECK(fit.law.A == doctest::Approx(truth.A).epsilon(0.01));
  CHECK(fit.law.B == doctest::Approx(truth.B).epsilon(0.01));
  CHECK(fit.law.alpha == doctest::Approx(truth.alpha).epsilon(0.01));
  CHECK(fit.law.beta == doctest::Approx(truth.beta).epsilon(0.01));
  CHECK(fit.alpha.low <= fit.law.alpha + 1e-6);
  CHECK(fit.alpha.high >= fit.law.alpha - 1e-6);
  CHECK_THROWS(fit_chinchilla({points.begin(), points.begin() + 4}));
}
