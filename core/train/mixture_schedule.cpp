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
  std::vector<int64_t> credit(k, 0);  // |credit| < period < 2^32
  std::vector<uint32_t> seen(k, 0);
  schedule_.resize(period);
  rank_.resize(period);
  for (uint32_t t = 0; t < period; ++t) {
    size_t best = 0;
    for (size_t i = 0; i < k; ++i) {
      credit[i] += static_cast<int64_t>(counts_[i]);
      if (credit[i] > credit[best]) best = i;
    }
    credit[best] -= static_cast<int64_t>(period);
    schedule_[t] = static_cast<uint16_t>(best);
    rank_[t] = seen[best]++;
  }
}

namespace {

__extension__ typedef unsigned __int128 Wide;  // t * a < 2^124: no overflow

// Positions of the left half among the first t of a node of count c whose left half has a.
uint64_t left_before(uint64_t t, uint64_t a, uint64_t c) {
  return static_cast<uint64_t>(static_cast<Wide>(t) * a / c);
}

}  // namespace

MixtureSchedule MixtureSchedule::exact_counts(const std::vector<uint64_t>& counts) {
  return MixtureSchedule(ExactTag{}, counts);
}

MixtureSchedule::MixtureSchedule(ExactTag, const std::vector<uint64_t>& counts) {
  if (counts.empty())
    throw Error(ErrorKind::kInvalidArgument, "a mixture needs at least one source");
  MixtureSchedule& s = *this;
  s.counts_ = counts;
  s.prefix_.assign(1, 0);
  for (size_t i = 0; i < counts.size(); ++i) {
    if (counts[i] == 0)
      throw Error(
          ErrorKind::kInvalidArgument,
          "data.sources[" + std::to_string(i) +
              "] would give no sample per pass: give it more epochs (epochs times its windows "
              "must be at least 1)");
    if (counts[i] > (uint64_t{1} << 62) - s.prefix_.back())
      throw Error(
          ErrorKind::kInvalidArgument,
          "the mixture's epochs add up to more than 2^62 samples per pass: give fewer epochs");
    s.prefix_.push_back(s.prefix_.back() + counts[i]);
  }
  s.period_ = s.prefix_.back();
}

MixtureSchedule::Draw MixtureSchedule::at(uint64_t g) const {
  const uint64_t position = g % period_;
  if (prefix_.empty()) {
    const uint32_t source = schedule_[position];
    return {source, (g / period_) * counts_[source] + rank_[position]};
  }
  uint32_t lo = 0, hi = static_cast<uint32_t>(counts_.size());
  uint64_t t = position;  // position inside node [lo, hi)
  while (hi - lo > 1) {
    const uint32_t mid = lo + (hi - lo) / 2;
    const uint64_t a = count_of(lo, mid), c = count_of(lo, hi);
    const uint64_t left = left_before(t, a, c);
    if (left_before(t + 1, a, c) > left) {
      hi = mid;
      t = left;
    } else {
      lo = mid;
      t -= left;
    }
  }
  return {lo, (g / period_) * counts_[lo] + t};
}

uint64_t MixtureSchedule::count_before(uint32_t source, uint64_t n) const {
  uint64_t count = (n / period_) * counts_[source];
  const uint64_t rest = n % period_;
  if (prefix_.empty()) {
    for (uint64_t position = 0; position < rest; ++position)
      count += schedule_[position] == source ? 1 : 0;
    return count;
  }
  uint32_t lo = 0, hi = static_cast<uint32_t>(counts_.size());
  uint64_t t = rest;  // positions of node [lo, hi) before the end of the prefix
  while (hi - lo > 1) {
    const uint32_t mid = lo + (hi - lo) / 2;
    const uint64_t left = left_before(t, count_of(lo, mid), count_of(lo, hi));
    if (source < mid) {
      hi = mid;
      t = left;
    } else {
      lo = mid;
      t -= left;
    }
  }
  return count + t;
}

}  // namespace patchbay::train
