// A mixture's training windows; see mixture_sampler.hpp.
#include "train/mixture_sampler.hpp"

#include "common/error.hpp"
#include "data/split.hpp"

namespace patchbay::train {

MixtureSampler::MixtureSampler(const std::vector<const data::TokenSequence*>& streams,
                               const std::vector<double>& weights, Sampling sampling, int64_t rows,
                               int64_t accum, int64_t seq_len)
    : streams_(streams), schedule_(weights), rows_(rows), accum_(accum), seq_len_(seq_len) {
  if (sampling == Sampling::kRandom)
    throw Error(
        ErrorKind::kInvalidArgument,
        "data.sampling = \"random\" cannot hold a mixture's proportions per epoch: use \"epochs\" "
        "(the default for [[data.sources]]) or \"documents\"");
  for (const data::TokenSequence* s : streams)
    samplers_.emplace_back(*s, s->document_starts(), sampling, rows, accum, seq_len);
}

TokenWindows MixtureSampler::training_windows(uint64_t seed, int64_t step, int64_t micro) const {
  TokenWindows windows{engine::Tensor::empty({rows_, seq_len_ + 1}, engine::DType::kI32)};
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
  const auto total = static_cast<uint64_t>(steps * accum_ * rows_);
  // The draws are numbered per source: the first draw of this source at or after `total`
  // would be its sample number `samples so far`. Count the period's remainder directly.
  const uint64_t period = schedule_.period();
  uint64_t count = (total / period) * schedule_.counts()[source];
  for (uint64_t g = total - total % period; g < total; ++g)
    count += schedule_.at(g).source == source ? 1 : 0;
  return count;
}

double MixtureSampler::epochs_after(size_t source, int64_t steps) const {
  return static_cast<double>(samples_after(source, steps)) /
         static_cast<double>(samplers_[source].epoch_size());
}

std::string MixtureSampler::rule() const {
  return "mixture: source schedule[g mod P] (smooth weighted round robin), then the source's " +
         samplers_.front().rule();
}

}  // namespace patchbay::train
