// Which source each training sample of a mixture reads (issue 35, item 3: the blend under
// `[[data.sources]]`).
//
// Sources given weights: the weights are turned into integer counts n_i summing to the period P
// (largest remainders, every source at least 1), and one period of the schedule is laid out by
// smooth weighted round robin: each position adds n_i to every source's credit and gives the
// position to the source with the most credit (ties: the lowest index), which then pays P. Sample g
// reads source s(g) = schedule[g mod P], as that source's sample number q(g) = floor(g / P) * n_s +
// rank[g mod P] (its own epochs and order then come from its WindowSampler). Both are table
// lookups: a pure function of g, so a resume or another number of ranks reads the same blend. Over
// any window of consecutive samples, source i's count differs from the window length times n_i / P
// by less than 2 (tested over every window of random weights), so the proportions hold exactly up
// to one sample at each end, whatever window of steps one looks at.
//
// Sources given epochs (exact_counts): source i's count per pass is n_i = its epochs times its
// epoch size (windows or documents), exactly, and the period is their sum T (any size, no
// table). One pass is laid out by a balanced binary split of the sources: at a node of count c
// whose left half has count a, position t < c goes left when floor((t+1) a / c) >
// floor(t a / c) (Bresenham), as the left half's position floor(t a / c), else as the right
// half's position t - floor(t a / c). So each source gets exactly n_i of every T samples,
// which is exactly its epochs of its own windows; s(g) and q(g) cost O(log k), and any window
// of consecutive samples holds each share within the tree depth ceil(log2 k) (1 for two
// sources, 2 for up to four; tested).
#pragma once

#include <cstdint>
#include <vector>

namespace patchbay::train {

class MixtureSchedule {
 public:
  // weights: one per source, each > 0 (Error(kInvalidArgument) naming the source otherwise).
  explicit MixtureSchedule(const std::vector<double>& weights, uint32_t period = 1u << 16);
  // counts: samples of each source per pass, each >= 1 (Error(kInvalidArgument) otherwise);
  // their sum is the period and must stay below 2^62.
  static MixtureSchedule exact_counts(const std::vector<uint64_t>& counts);

  struct Draw {
    uint32_t source = 0;
    uint64_t sample = 0;  // the source's own sample number
  };
  Draw at(uint64_t g) const;

  uint64_t period() const { return period_; }
  const std::vector<uint64_t>& counts() const { return counts_; }  // n_i per period
  // The share source i actually gets: n_i / P.
  double share(uint32_t source) const {
    return static_cast<double>(counts_[source]) / static_cast<double>(period_);
  }
  // Samples of `source` among g = 0 .. n-1.
  uint64_t count_before(uint32_t source, uint64_t n) const;

 private:
  struct ExactTag {};
  MixtureSchedule(ExactTag, const std::vector<uint64_t>& counts);  // exact_counts
  // Exact form: the count of sources [lo, hi).
  uint64_t count_of(uint32_t lo, uint32_t hi) const { return prefix_[hi] - prefix_[lo]; }

  uint64_t period_ = 0;
  std::vector<uint64_t> counts_;
  std::vector<uint16_t> schedule_;  // weights: source of each position of one period
  std::vector<uint32_t> rank_;      // its number among that source's positions in the period
  std::vector<uint64_t> prefix_;    // exact counts: prefix_[i] = n_0 + ... + n_{i-1}
};

}  // namespace patchbay::train
