// Random, epoch and document-start window orders; see window_sampler.hpp.
#include "train/window_sampler.hpp"

#include <algorithm>

#include "common/error.hpp"
#include "data/split.hpp"

namespace patchbay::train {

Sampling sampling_from_name(const std::string& name) {
  if (name == "random") return Sampling::kRandom;
  if (name == "epochs") return Sampling::kEpochs;
  if (name == "documents") return Sampling::kDocuments;
  throw Error(
      ErrorKind::kInvalidArgument,
      "data.sampling = \"" + name + "\" is not a window order (random, epochs or documents)");
}

std::string sampling_name(Sampling sampling) {
  switch (sampling) {
    case Sampling::kRandom:
      return "random";
    case Sampling::kEpochs:
      return "epochs";
    case Sampling::kDocuments:
      return "documents";
  }
  return "?";
}

uint64_t permuted_index(uint64_t p, uint64_t n, uint64_t key) {
  if (n <= 1) return 0;
  int bits = 0;
  while ((uint64_t{1} << bits) < n) ++bits;
  if (bits % 2 != 0) ++bits;  // two equal halves
  const int half = bits / 2;
  const uint64_t mask = (uint64_t{1} << half) - 1;
  uint64_t x = p;
  do {  // cycle-walking: the Feistel permutes [0, 2^bits); repeat until back inside [0, n)
    uint64_t left = x >> half, right = x & mask;
    for (uint64_t round = 0; round < 4; ++round) {
      const uint64_t f = data::splitmix64(right ^ data::splitmix64(key + round)) & mask;
      const uint64_t next = left ^ f;
      left = right;
      right = next;
    }
    x = (left << half) | right;
  } while (x >= n);
  return x;
}

WindowSampler::WindowSampler(const data::TokenSource& stream, std::vector<uint64_t> document_starts,
                             Sampling sampling, int64_t rows, int64_t accum, int64_t seq_len)
    : stream_(stream),
      document_starts_(std::move(document_starts)),
      sampling_(sampling),
      rows_(rows),
      accum_(accum),
      seq_len_(seq_len) {
  const uint64_t n = stream.size(), t = static_cast<uint64_t>(seq_len);
  if (seq_len < 1 || n < t + 1)
    throw Error(ErrorKind::kInvalidArgument,
                "the training split holds " + std::to_string(n) +
                    " tokens, too few for one window of seq_len + 1 = " +
                    std::to_string(seq_len + 1) + "; lower train.seq_len or use a larger corpus");
  if (sampling == Sampling::kEpochs) units_ = (n - 1) / t;
  if (sampling == Sampling::kDocuments) {
    if (document_starts_.empty())
      throw Error(
          ErrorKind::kInvalidArgument,
          "data.sampling = \"documents\" needs document boundaries: a dataset prepared with "
          "`patchbay data prepare --source ...` (data.prepared); the single-corpus [data] form has "
          "none");
    units_ = document_starts_.size();
  }
}

uint64_t WindowSampler::window_start(uint64_t seed, uint64_t sample) const {
  const uint64_t epoch = sample / units_, position = sample % units_;
  const uint64_t key =
      data::splitmix64(data::splitmix64(seed ^ 0x65706f6368ull /* "epoch" */) ^ epoch);
  const uint64_t unit = permuted_index(position, units_, key);
  if (sampling_ == Sampling::kEpochs) return unit * static_cast<uint64_t>(seq_len_);
  const uint64_t last_start = stream_.size() - static_cast<uint64_t>(seq_len_) - 1;
  return std::min(document_starts_[unit], last_start);
}

TokenWindows WindowSampler::training_windows(uint64_t seed, int64_t step, int64_t micro) const {
  if (sampling_ == Sampling::kRandom)
    return train::training_windows(stream_, seed, step, micro, rows_, seq_len_);
  TokenWindows windows{
      engine::Tensor::empty({rows_, seq_len_ + 1}, engine::DType::kI32), {}, engine::Tensor()};
  int32_t* ids = windows.ids.data<int32_t>();
  const auto first = static_cast<uint64_t>((step * accum_ + micro) * rows_);
  for (int64_t r = 0; r < rows_; ++r) {
    windows.starts.push_back(window_start(seed, first + static_cast<uint64_t>(r)));
    stream_.copy(windows.starts.back(),
                 std::span<int32_t>(ids + r * (seq_len_ + 1), static_cast<size_t>(seq_len_) + 1));
  }
  return windows;
}

std::optional<double> WindowSampler::epochs_after(int64_t steps) const {
  if (sampling_ == Sampling::kRandom) return std::nullopt;
  return static_cast<double>(steps) * static_cast<double>(accum_ * rows_) /
         static_cast<double>(units_);
}

std::string WindowSampler::rule() const {
  if (sampling_ == Sampling::kRandom) return "splitmix64(seed, step, micro_step, row)";
  return std::string(sampling_ == Sampling::kEpochs ? "packed windows" : "document starts") +
         ", sample (step * G + micro) * B + row, epoch permutation feistel(seed, epoch)";
}

TokenWindows with_document_segments(TokenWindows windows,
                                    const std::vector<uint64_t>& document_starts) {
  const int64_t rows = windows.ids.size(0), width = windows.ids.size(1);
  if (static_cast<int64_t>(windows.starts.size()) != rows)
    throw Error(ErrorKind::kInternal, "with_document_segments: the windows carry " +
                                          std::to_string(windows.starts.size()) +
                                          " start offsets for " + std::to_string(rows) + " rows");
  if (document_starts.empty())
    throw Error(ErrorKind::kInvalidArgument,
                "data.pack_documents = true needs document boundaries: a dataset prepared with "
                "`patchbay data prepare --source ...` (data.prepared)");
  std::vector<int32_t> segments(static_cast<size_t>(rows * width));
  for (int64_t r = 0; r < rows; ++r) {
    const uint64_t start = windows.starts[static_cast<size_t>(r)];
    // The first document starting after the window's first id; each one starting inside the
    // window opens the next segment.
    auto next = std::upper_bound(document_starts.begin(), document_starts.end(), start);
    int32_t segment = 0;
    for (int64_t t = 0; t < width; ++t) {
      const uint64_t offset = start + static_cast<uint64_t>(t);
      while (next != document_starts.end() && *next <= offset) {
        if (*next == offset) ++segment;
        ++next;
      }
      segments[static_cast<size_t>(r * width + t)] = segment;
    }
  }
  windows.segment_ids =
      engine::Tensor::from_data(segments.data(), {rows, width}, engine::DType::kI32);
  return windows;
}

}  // namespace patchbay::train
