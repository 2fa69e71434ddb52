// A mixture's training windows; see mixture_sampler.hpp.
#include "train/mixture_sampler.hpp"

#include <cmath>

#include "common/error.hpp"
#include "data/split.hpp"

namespace patchbay::train {

namespace {

void refuse_random(Sampling sampling) {
  if (sampling == Sampling::kRandom)
    throw Error(
        ErrorKind::kInvalidArgument,
        "data.sampling = \"random\" cannot hold a mixture's proportions per epoch: use \"epochs\" "
        "(the default for [[data.sources]]) or \"documents\"");
}

std::vector<WindowSampler> source_samplers(const std::vector<const data::TokenSequence*>& streams,
                                           Sampling sampling, int64_t rows, int64_t accum,
                                           int64_t seq_len) {
  refuse_random(sampling);
  std::vector<WindowSampler> samplers;
  for (const data::TokenSequence* s : streams)
    samplers.emplace_back(*s, s->document_starts(), sampling, rows, accum, seq_len);
  return samplers;
}

// Epochs per pass -> samples per pass: epochs times the source's windows (or documents).
MixtureSchedule schedule_of(const std::vector<WindowSampler>& samplers,
                            const std::vector<double>& shares, bool by_epochs) {
  if (!by_epochs) return MixtureSchedule(shares);
  if (shares.size() != samplers.size())
    throw Error(ErrorKind::kInvalidArgument, "a mixture needs one number of epochs per source");
  std::vector<uint64_t> counts;
  for (size_t i = 0; i < shares.size(); ++i) {
    const double samples = shares[i] * static_cast<double>(samplers[i].epoch_size());
    if (!(shares[i] > 0) || !std::isfinite(samples) || samples > 0x1p62)
      throw Error(ErrorKind::kInvalidArgument,
                  "data.sources[" + std::to_string(i) + "].epochs is " + std::to_string(shares[i]) +
                      ": epochs must be a positive number (and epochs times the source's windows "
                      "below 2^62)");
    counts.push_back(static_cast<uint64_t>(std::llround(samples)));
  }
  return MixtureSchedule::exact_counts(counts);
}

}  // namespace

MixtureSampler::MixtureSampler(const std::vector<const data::TokenSequence*>& streams,
                               const std::vector<double>& shares, bool by_epochs, Sampling sampling,
                               int64_t rows, int64_t accum, int64_t seq_len)
    : streams_(streams),
      samplers_(source_samplers(streams, sampling, rows, accum, seq_len)),
      schedule_(schedule_of(samplers_, shares, by_epochs)),
      by_epochs_(by_epochs),
      rows_(rows),
      accum_(accum),
      seq_len_(seq_len) {}

TokenWindows MixtureSampler::training_windows(uint64_t seed, int64_t step, int64_t micro) const {
  // Rows come from several streams: no single offset space, so `starts` stays empty (and
  // [data] pack_documents is refused with a mixture).
  TokenWindows windows{
      engine::Tensor::empty({rows_, seq_len_ + 1}, engine::DType::kI32), {}, engine::Tensor()};
  int32_t* ids = windows.ids.data<int32_t>();
  const auto first = static_cast<uint64_t>((step * accum_ + micro) * rows_);
  for (int64_t r = 0; r < rows_; ++r) {
    const MixtureSchedule::Draw d = schedule_.at(first + static_cast<uint64_t>(r));
    const uint64_t source_seed = data::splitmix64(seed ^ (0x6d6978ull + d.source));  // "mix" + i
    streams_[d.source]->copy(
        samplers_[d.source].window_start(source_seed, d.sample),
        std::span<int32_t>(ids + r * (seq_len_ + 1), static_cast<size_t>(seq_len_) + 1));
  }
  return windows;
}

uint64_t MixtureSampler::samples_after(size_t source, int64_t steps) const {
  return schedule_.count_before(static_cast<uint32_t>(source),
                                static_cast<uint64_t>(steps * accum_ * rows_));
}

double MixtureSampler::epochs_after(size_t source, int64_t steps) const {
  return static_cast<double>(samples_after(source, steps)) /
         static_cast<double>(samplers_[source].epoch_size());
}

std::string MixtureSampler::rule() const {
  if (by_epochs_)
    return "mixture by epochs: source of g mod T by binary Bresenham split of the per-pass counts "
           "(T = " +
           std::to_string(schedule_.period()) + "), then the source's " + samplers_.front().rule();
  return "mixture: source schedule[g mod P] (smooth weighted round robin), then the source's " +
         samplers_.front().rule();
}

}  // namespace patchbay::train
