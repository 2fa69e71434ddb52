// Which source each training sample of a mixture reads (issue 35, item 3: the blend under
// `[[data.sources]]`; the config wiring and per-source evaluation are not done yet).
//
// The weights are turned into integer counts n_i summing to the period P (largest remainders,
// every source at least 1), and one period of the schedule is laid out by smooth weighted
// round robin: each position adds n_i to every source's credit and gives the position to the
// source with the most credit (ties: the lowest index), which then pays P. Sample g reads
// source s(g) = schedule[g mod P], as that source's sample number
// q(g) = floor(g / P) * n_s + rank[g mod P] (its own epochs and order then come from its
// WindowSampler). Both are table lookups: a pure function of g, so a resume or another number
// of ranks reads the same blend. Over any window of consecutive samples, source i's count
// differs from the window length times n_i / P by less than 2 (tested over every window of
// random weights), so the proportions hold exactly up to one sample at each end, whatever
// window of steps one looks at.
#pragma once

#include <cstdint>
#include <vector>

namespace patchbay::train {

class MixtureSchedule {
 public:
  // weights: one per source, each > 0 (Error(kInvalidArgument) naming the source otherwise).
  explicit MixtureSchedule(const std::vector<double>& weights, uint32_t period = 1u << 16);

  struct Draw {
    uint32_t source = 0;
    uint64_t sample = 0;  // the source's own sample number
  };
  Draw at(uint64_t g) const;

  uint32_t period() const { return period_; }
  const std::vector<uint32_t>& counts() const { return counts_; }  // n_i per period
  // The share source i actually gets: n_i / P.
  double share(uint32_t source) const { return static_cast<double>(counts_[source]) / period_; }

 private:
  uint32_t period_;
  std::vector<uint32_t> counts_;
  std::vector<uint16_t> schedule_;  // source of each position of one period
  std::vector<uint32_t> rank_;      // its number among that source's positions in the period
};

}  // namespace patchbay::train
