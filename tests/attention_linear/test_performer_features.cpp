// Performer's random features (plugins/attention_performer/random_features.cpp): rows within a
// block orthogonal, norms chi-distributed (mean near sqrt(d)), deterministic from (seed, draw),
// and the FAVOR+ positive-feature estimate of softmax attention, written here in double from
// the definition, converging as nb_features grows (fixed seeds, so the test is repeatable).
#include <doctest/doctest.h>

#include <cmath>
#include <random>
#include <vector>

#include "random_features.hpp"

namespace {

using patchbay_performer::default_feature_count;
using patchbay_performer::draw_orthogonal_features;

double dot(const float* a, const float* b, int64_t d) {
  double s = 0;
  for (int64_t i = 0; i < d; ++i) s += static_cast<double>(a[i]) * b[i];
  return s;
}

// Mean over rows of the total-variation distance between exact softmax attention rows
// softmax(q_i . k_j / sqrt(d)) and the FAVOR+ estimate normalised per row.
double attention_estimate_error(int64_t m, int64_t d, int64_t t, uint64_t seed) {
  std::mt19937 rng(static_cast<uint32_t>(seed));
  std::normal_distribution<float> normal(0.f, 0.7f);
  std::vector<float> q(static_cast<size_t>(t * d)), k(q.size());
  for (float& x : q) x = normal(rng);
  for (float& x : k) x = normal(rng);
  const std::vector<float> omega = draw_orthogonal_features(m, d, seed, 0);
  const double pre = std::pow(static_cast<double>(d), -0.25);
  auto features = [&](const float* x) {  // exp(omega . xs - |xs|^2 / 2) / sqrt(m)
    std::vector<float> xs(static_cast<size_t>(d));
    double sq = 0;
    for (int64_t i = 0; i < d; ++i) {
      xs[static_cast<size_t>(i)] = static_cast<float>(x[i] * pre);
      sq += static_cast<double>(xs[static_cast<size_t>(i)]) * xs[static_cast<size_t>(i)];
    }
    std::vector<double> phi(static_cast<size_t>(m));
    for (int64_t f = 0; f < m; ++f)
      phi[static_cast<size_t>(f)] =
          std::exp(dot(omega.data() + f * d, xs.data(), d) - sq / 2) / std::sqrt(double(m));
    return phi;
  };
  std::vector<std::vector<double>> fk;
  for (int64_t j = 0; j < t; ++j) fk.push_back(features(k.data() + j * d));
  double total = 0;
  for (int64_t i = 0; i < t; ++i) {
    std::vector<double> fq = features(q.data() + i * d), exact(static_cast<size_t>(t)),
                        estimate(static_cast<size_t>(t));
    double exact_sum = 0, estimate_sum = 0;
    for (int64_t j = 0; j < t; ++j) {
      exact[static_cast<size_t>(j)] =
          std::exp(dot(q.data() + i * d, k.data() + j * d, d) / std::sqrt(double(d)));
      double e = 0;
      for (int64_t f = 0; f < m; ++f)
        e += fq[static_cast<size_t>(f)] * fk[static_cast<size_t>(j)][static_cast<size_t>(f)];
      estimate[static_cast<size_t>(j)] = e;
      exact_sum += exact[static_cast<size_t>(j)];
      estimate_sum += e;
    }
    double tv = 0;
    for (int64_t j = 0; j < t; ++j)
      tv += std::fabs(exact[static_cast<size_t>(j)] / exact_sum -
                      estimate[static_cast<size_t>(j)] / estimate_sum);
    total += tv / 2;
  }
  return total / static_cast<double>(t);
}

}  // namespace

TEST_CASE("performer features: orthogonal blocks, chi norms, deterministic from (seed, draw)") {
  const int64_t d = 16, m = 40;  // two full blocks and a block of 8
  const std::vector<float> omega = draw_orthogonal_features(m, d, 7, 0);
  REQUIRE(omega.size() == static_cast<size_t>(m * d));
  double norm_sum = 0;
  for (int64_t a = 0; a < m; ++a) {
    const double na = std::sqrt(dot(omega.data() + a * d, omega.data() + a * d, d));
    norm_sum += na;
    for (int64_t b = a + 1; b < m && b / d == a / d; ++b) {
      const double nb = std::sqrt(dot(omega.data() + b * d, omega.data() + b * d, d));
      CHECK(std::fabs(dot(omega.data() + a * d, omega.data() + b * d, d)) / (na * nb) < 1e-5);
    }
  }
  // E chi_16 = 3.94; 40 draws of sd ~0.7 give a mean within 0.4 with overwhelming probability.
  CHECK(std::fabs(norm_sum / m - 3.94) < 0.4);
  CHECK(draw_orthogonal_features(m, d, 7, 0) == omega);
  CHECK(draw_orthogonal_features(m, d, 7, 1) != omega);
  CHECK(draw_orthogonal_features(m, d, 8, 0) != omega);
  CHECK(default_feature_count(64) == 266);  // floor(64 ln 64) = floor(266.17)
  CHECK(default_feature_count(16) == 44);   // floor(44.36)
  CHECK(default_feature_count(1) == 1);
}

TEST_CASE("performer: the attention estimate error falls as nb_features grows") {
  const int64_t d = 16, t = 24;
  std::vector<double> errors;
  for (int64_t m : {8, 64, 512, 4096}) {
    double e = 0;
    for (uint64_t seed : {1, 2, 3, 4}) e += attention_estimate_error(m, d, t, seed) / 4;
    errors.push_back(e);
    MESSAGE("nb_features " << m << ": mean total-variation error " << e);
  }
  for (size_t i = 1; i < errors.size(); ++i) CHECK(errors[i] < errors[i - 1]);
  // Monte-Carlo rate: error ~ 1/sqrt(m); 512x more features must cut it well over 4x.
  CHECK(errors.back() < errors.front() / 4);
  CHECK(errors.back() < 0.05);
}
