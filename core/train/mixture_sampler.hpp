// Training windows of a mixture ([[data.sources]]): sample g of the global batch sequence
// (g = (step * G + micro) * B + row) reads source s(g) as its sample q(g) (mixture_schedule.hpp),
// and that source's own WindowSampler (epochs or document starts, seeded per source) says
// which window. A pure function of (seed, step, micro) like every other order: resumes and
// other numbers of ranks read the same windows, and every window of steps holds the weights'
// proportions up to one sample at each end. Sources given epochs instead of weights share
// each pass exactly: source i gets epochs_i times its epoch size (windows, or documents) of
// every pass of T = sum of those samples, i.e. exactly its epochs (exact_counts in
// mixture_schedule.hpp).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "data/token_sequence.hpp"
#include "train/batches.hpp"
#include "train/mixture_schedule.hpp"
#include "train/window_sampler.hpp"

namespace patchbay::train {

class MixtureSampler {
 public:
  // streams[i]: source i's training stream (outlives the sampler); sampling kEpochs or
  // kDocuments (kRandom has no epochs to share out: refused). `shares[i]` is source i's weight,
  // or with `by_epochs` its epochs per pass (> 0; may be fractional: rounded to whole samples).
  MixtureSampler(const std::vector<const data::TokenSequence*>& streams,
                 const std::vector<double>& shares, bool by_epochs, Sampling sampling, int64_t rows,
                 int64_t accum, int64_t seq_len);

  TokenWindows training_windows(uint64_t seed, int64_t step, int64_t micro) const;

  // Samples source i has given after `steps` optimizer steps, and its epochs done.
  uint64_t samples_after(size_t source, int64_t steps) const;
  double epochs_after(size_t source, int64_t steps) const;
  const MixtureSchedule& schedule() const { return schedule_; }
  std::string rule() const;

 private:
  std::vector<const data::TokenSequence*> streams_;
  std::vector<WindowSampler> samplers_;
  MixtureSchedule schedule_;
  bool by_epochs_;
  int64_t rows_, accum_, seq_len_;
};

}  // namespace patchbay::train
