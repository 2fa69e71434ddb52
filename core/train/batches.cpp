// Batches from token caches; see batches.hpp for the window rules.
#include "train/batches.hpp"

#include <algorithm>
#include <span>
#include <string>

#include "common/error.hpp"
#include "data/split.hpp"

namespace patchbay::train {

namespace {

void require_window(uint64_t count, int64_t seq_len) {
  if (seq_len < 1 || count < static_cast<uint64_t>(seq_len) + 1)
    throw Error(ErrorKind::kInvalidArgument,
                "the split holds " + std::to_string(count) + " tokens, too few for one window of seq_len + 1 = " +
                    std::to_string(seq_len + 1) + "; lower train.seq_len or use a larger corpus");
}

TokenWindows windows_at(const data::TokenSource& cache, const std::vector<uint64_t>& starts,
                        int64_t seq_len) {
  const int64_t rows = static_cast<int64_t>(starts.size());
  TokenWindows windows{engine::Tensor::empty({rows, seq_len + 1}, engine::DType::kI32), starts,
                       engine::Tensor()};
  int32_t* ids = windows.ids.data<int32_t>();
  for (int64_t r = 0; r < rows; ++r)
    cache.copy(starts[static_cast<size_t>(r)],
               std::span<int32_t>(ids + r * (seq_len + 1), static_cast<size_t>(seq_len) + 1));
  return windows;
}

uint64_t mix(uint64_t seed, int64_t step, int64_t micro_step, int64_t row) {
  uint64_t h = data::splitmix64(seed ^ 0x747261696e626174ull);  // "trainbat"
  h = data::splitmix64(h ^ static_cast<uint64_t>(step));
  h = data::splitmix64(h ^ static_cast<uint64_t>(micro_step));
  return data::splitmix64(h ^ static_cast<uint64_t>(row));
}

}  // namespace

uint64_t training_window_start(uint64_t seed, int64_t step, int64_t micro_step, int64_t row, uint64_t count,
                               int64_t seq_len) {
  require_window(count, seq_len);
  return mix(seed, step, micro_step, row) % (count - static_cast<uint64_t>(seq_len));
}

uint64_t validation_window_start(int64_t index, int64_t window_count, uint64_t count, int64_t seq_len) {
  require_window(count, seq_len);
  if (window_count <= 1) return 0;
  const uint64_t last_start = count - static_cast<uint64_t>(seq_len) - 1;
  // In long double (64-bit mantissa): index * last_start can exceed 2^64 for huge caches.
  const long double position = static_cast<long double>(index) * static_cast<long double>(last_start) /
                               static_cast<long double>(window_count - 1);
  return static_cast<uint64_t>(position);
}

TokenWindows training_windows(const data::TokenSource& cache, uint64_t seed, int64_t step,
                              int64_t micro_step, int64_t rows, int64_t seq_len) {
  std::vector<uint64_t> starts;
  for (int64_t r = 0; r < rows; ++r)
    starts.push_back(training_window_start(seed, step, micro_step, r, cache.size(), seq_len));
  return windows_at(cache, starts, seq_len);
}

TokenWindows validation_windows(const data::TokenSource& cache, int64_t batch_index,
                                int64_t batch_count, int64_t rows, int64_t seq_len) {
  std::vector<uint64_t> starts;
  for (int64_t r = 0; r < rows; ++r)
    starts.push_back(validation_window_start(batch_index * rows + r, batch_count * rows,
                                             cache.size(), seq_len));
  return windows_at(cache, starts, seq_len);
}

Batch causal_batch(const TokenWindows& windows) {
  if (windows.ids.dim() != 2 || windows.ids.size(1) < 2)
    throw Error(ErrorKind::kInvalidArgument,
                "causal_batch: expected windows [rows, T + 1] with T >= 1, found " +
                    windows.ids.str());
  const int64_t rows = windows.ids.size(0), seq_len = windows.ids.size(1) - 1;
  Batch batch{engine::Tensor::empty({rows, seq_len}, engine::DType::kI32),
              engine::Tensor::empty({rows, seq_len}, engine::DType::kI32), engine::Tensor()};
  if (windows.segment_ids.defined())  // the inputs' segments: window positions [0, T)
    batch.segment_ids = windows.segment_ids.narrow(1, 0, seq_len).contiguous();
  const engine::Tensor source = windows.ids.contiguous().to(engine::DType::kI32);
  const int32_t* ids = source.data<int32_t>();
  int32_t* inputs = batch.inputs.data<int32_t>();
  int32_t* targets = batch.targets.data<int32_t>();
  for (int64_t r = 0; r < rows; ++r) {
    const int32_t* window = ids + r * (seq_len + 1);
    std::copy_n(window, seq_len, inputs + r * seq_len);
    std::copy_n(window + 1, seq_len, targets + r * seq_len);
  }
  return batch;
}

Batch training_batch(const data::TokenSource& cache, uint64_t seed, int64_t step, int64_t micro_step, int64_t rows,
                     int64_t seq_len) {
  return causal_batch(training_windows(cache, seed, step, micro_step, rows, seq_len));
}

Batch validation_batch(const data::TokenSource& cache, int64_t batch_index, int64_t batch_count, int64_t rows,
                       int64_t seq_len) {
  return causal_batch(validation_windows(cache, batch_index, batch_count, rows, seq_len));
}

Batch random_batch(int64_t vocab_size, uint64_t seed, int64_t step, int64_t rows, int64_t seq_len) {
  if (vocab_size < 1) throw Error(ErrorKind::kInvalidArgument, "random_batch: vocab_size must be >= 1");
  Batch batch{engine::Tensor::empty({rows, seq_len}, engine::DType::kI32),
              engine::Tensor::empty({rows, seq_len}, engine::DType::kI32), engine::Tensor()};
  int32_t* inputs = batch.inputs.data<int32_t>();
  int32_t* targets = batch.targets.data<int32_t>();
  for (int64_t r = 0; r < rows; ++r) {
    for (int64_t t = 0; t <= seq_len; ++t) {
      const auto id = static_cast<int32_t>(mix(seed, step, r, t) % static_cast<uint64_t>(vocab_size));
      if (t < seq_len) inputs[r * seq_len + t] = id;
      if (t > 0) targets[r * seq_len + t - 1] = id;
    }
  }
  return batch;
}

}  // namespace patchbay::train
