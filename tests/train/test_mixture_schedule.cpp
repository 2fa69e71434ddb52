// The mixture blend (core/train/mixture_schedule.hpp): counts that match the weights, every
// window of consecutive samples within 2 of its exact share (checked over every window, for
// several random weight sets), each source's own samples numbered without gaps, and weights
// that are zero or negative refused by message. Exact counts (sources given epochs): each pass
// of T samples gives every source exactly its count, windows hold the shares within the
// split tree's depth, and count_before agrees with counting draws one by one.
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
  CHECK(s.counts() == std::vector<uint64_t>{700, 300});
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

TEST_CASE("exact counts: every pass gives each source exactly its count, windows within depth") {
  std::mt19937 random(777);
  for (int trial = 0; trial < 8; ++trial) {
    const size_t k = 1 + static_cast<size_t>(trial % 5);  // 1 to 5 sources
    std::vector<uint64_t> counts(k);
    for (uint64_t& n : counts) n = std::uniform_int_distribution<uint64_t>(1, 400)(random);
    const MixtureSchedule s = MixtureSchedule::exact_counts(counts);
    const uint64_t period = std::accumulate(counts.begin(), counts.end(), uint64_t{0});
    REQUIRE(s.period() == period);
    int depth = 0;
    while ((size_t{1} << depth) < k) ++depth;
    std::vector<uint64_t> next(k, 0);
    std::vector<double> low(k, 0), high(k, 0);
    std::vector<int64_t> count(k, 0);
    for (uint64_t g = 0; g < 3 * period; ++g) {
      const MixtureSchedule::Draw d = s.at(g);
      REQUIRE(d.source < k);
      CHECK(d.sample == next[d.source]++);
      ++count[d.source];
      for (size_t i = 0; i < k; ++i) {
        CHECK(s.count_before(static_cast<uint32_t>(i), g + 1) == static_cast<uint64_t>(count[i]));
        const double deviation = static_cast<double>(count[i]) -
                                 static_cast<double>(g + 1) * s.share(static_cast<uint32_t>(i));
        low[i] = std::min(low[i], deviation);
        high[i] = std::max(high[i], deviation);
      }
      if ((g + 1) % period == 0)  // a whole pass: exactly the counts
        for (size_t i = 0; i < k; ++i)
          CHECK(static_cast<uint64_t>(count[i]) == counts[i] * ((g + 1) / period));
    }
    for (size_t i = 0; i < k; ++i) {
      CAPTURE(trial);
      CAPTURE(i);
      CHECK(high[i] - low[i] < std::max(depth, 1) + 1e-9);
    }
  }
  // Huge passes (epochs of a large corpus): no table, no overflow, still exact.
  const MixtureSchedule big =
      MixtureSchedule::exact_counts({3'000'000'000'000ull, 1'000'000'000'001ull});
  const uint64_t g = 3'999'999'999'999ull;
  CHECK(big.count_before(0, big.period()) == 3'000'000'000'000ull);
  CHECK(big.count_before(0, g) + big.count_before(1, g) == g);
  CHECK(big.at(big.period() + 5).sample == big.at(5).sample + big.counts()[big.at(5).source]);
  CHECK_THROWS_WITH_AS(MixtureSchedule::exact_counts({4, 0}),
                       doctest::Contains("data.sources[1] would give no sample"), patchbay::Error);
}
