// The mixture blend (core/train/mixture_schedule.hpp): counts that match the weights, every
// window of consecutive samples within 2 of its exact share (checked over every window, for
// several random weight sets), each source's own samples numbered without gaps, and weights
// that are zero or negative refused by message.
#include <doctest/doctest.h>

#include <algorithm>
#include <numeric>
#include <random>
#include <string>
#include <vector>

#include "common/error.hpp"
#include "train/mixture_schedule.hpp"

using patchbay::train::MixtureSchedule;

TEST_CASE("mixture counts follow the weights") {
  const MixtureSchedule s({0.7, 0.3}, 1000);
  CHECK(s.counts() == std::vector<uint32_t>{700, 300});
  const MixtureSchedule tiny({1.0, 1e-9}, 100);
  CHECK(tiny.counts()[1] == 1);  // every source gets at least one sample a period
}

TEST_CASE(
    "every window of samples holds the proportions within 2, and sample numbers have no gaps") {
  std::mt19937 random(12345);
  for (int trial = 0; trial < 6; ++trial) {
    const size_t k = 2 + static_cast<size_t>(trial % 4);
    std::vector<double> weights(k);
    for (double& w : weights) w = std::uniform_real_distribution<double>(0.05, 1.0)(random);
    const uint32_t period = 997;
    const MixtureSchedule s(weights, period);
    std::vector<uint64_t> next(k, 0);
    std::vector<double> low(k, 0), high(k, 0);
    std::vector<int64_t> count(k, 0);
    for (uint64_t g = 0; g < 3ull * period; ++g) {
      const MixtureSchedule::Draw d = s.at(g);
      REQUIRE(d.source < k);
      CHECK(d.sample == next[d.source]++);  // consecutive sample numbers per source
      ++count[d.source];
      // D_i(t) = C_i(t) - t * share_i; any window's deviation is D_i(b) - D_i(a).
      for (size_t i = 0; i < k; ++i) {
        const double deviation = static_cast<double>(count[i]) -
                                 static_cast<double>(g + 1) * s.share(static_cast<uint32_t>(i));
        low[i] = std::min(low[i], deviation);
        high[i] = std::max(high[i], deviation);
      }
    }
    for (size_t i = 0; i < k; ++i) {
      CAPTURE(trial);
      CAPTURE(i);
      CHECK(high[i] - low[i] < 2.0);
      CHECK(s.share(static_cast<uint32_t>(i)) ==
            doctest::Approx(weights[i] / std::accumulate(weights.begin(), weights.end(), 0.0))
                .epsilon(0.01));
    }
  }
}

TEST_CASE("a zero or negative weight is refused") {
  CHECK_THROWS_WITH_AS(MixtureSchedule({0.5, 0.0}),
                       doctest::Contains("data.sources[1].weight is 0"), patchbay::Error);
  CHECK_THROWS_WITH_AS(MixtureSchedule({-1.0}), doctest::Contains("must be a positive number"),
                       patchbay::Error);
  CHECK_THROWS_AS(MixtureSchedule({}), patchbay::Error);
}
