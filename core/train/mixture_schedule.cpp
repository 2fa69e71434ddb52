// The mixture blend's period table; see mixture_schedule.hpp.
#include "train/mixture_schedule.hpp"

#include <algorithm>
#include <cmath>
#include <numeric>
#include <string>

#include "common/error.hpp"

namespace patchbay::train {

MixtureSchedule::MixtureSchedule(const std::vector<double>& weights, uint32_t period)
    : period_(period) {
  if (weights.empty())
    throw Error(ErrorKind::kInvalidArgument, "a mixture needs at least one source");
  if (weights.size() > 65535 || weights.size() > period)
    throw Error(ErrorKind::kInvalidArgument, "a mixture of " + std::to_string(weights.size()) +
                                                 " sources is more than its period of " +
                                                 std::to_string(period) + " samples can share out");
  double total = 0;
  for (size_t i = 0; i < weights.size(); ++i) {
    if (!(weights[i] > 0) || !std::isfinite(weights[i]))
      throw Error(
          ErrorKind::kInvalidArgument,
          "data.sources[" + std::to_string(i) + "].weight is " + std::to_string(weights[i]) +
              ": a weight must be a positive number (leave a source out rather than weigh it 0)");
    total += weights[i];
  }
  // Integer counts by largest remainders, each at least 1.
  const size_t k = weights.size();
  counts_.assign(k, 1);
  std::vector<double> remainder(k);
  uint64_t given = k;
  for (size_t i = 0; i < k; ++i) {
    const double exact = weights[i] / total * (period - k);
    counts_[i] += static_cast<uint32_t>(std::floor(exact));
    given += static_cast<uint32_t>(std::floor(exact));
    remainder[i] = exact - std::floor(exact);
  }
  std::vector<size_t> order(k);
  std::iota(order.begin(), order.end(), size_t{0});
  std::stable_sort(order.begin(), order.end(),
                   [&](size_t a, size_t b) { return remainder[a] > remainder[b]; });
  for (size_t j = 0; given < period; ++j, ++given) ++counts_[order[j % k]];
  // Smooth weighted round robin over one period.
  std::vector<int64_t> credit(k, 0);
  std::vector<uint32_t> seen(k, 0);
  schedule_.resize(period);
  rank_.resize(period);
  for (uint32_t t = 0; t < period; ++t) {
    size_t best = 0;
    for (size_t i = 0; i < k; ++i) {
      credit[i] += counts_[i];
      if (credit[i] > credit[best]) best = i;
    }
    credit[best] -= period;
    schedule_[t] = static_cast<uint16_t>(best);
    rank_[t] = seen[best]++;
  }
}

MixtureSchedule::Draw MixtureSchedule::at(uint64_t g) const {
  const uint64_t position = g % period_;
  const uint32_t source = schedule_[position];
  return {source, (g / period_) * counts_[source] + rank_[position]};
}

}  // namespace patchbay::train
