// Training and validation batches cut from a memory-mapped token cache.
//
// A batch is `rows` windows of seq_len + 1 consecutive ids: inputs = window[0 .. T),
// targets = window[1 .. T]. Shapes: inputs, targets [rows, T] i32.
//
// Training windows are chosen by a counter-based rule, no generator state:
//   start(seed, step, micro, row) = mix(seed, step, micro, row) mod (count - T)
// with mix a chain of splitmix64 rounds, so the batch of any (step, micro-step) is known
// without replaying the ones before it: a resumed run draws exactly the batches an
// uninterrupted one would, and two runs with one seed see the same data.
// Validation windows are fixed: window i of n starts at floor(i * (count - T - 1) / (n - 1))
// (evenly spaced over the split; the first window when n = 1), independent of the seed.
#pragma once

#include <cstdint>
#include <vector>

#include "data/token_cache.hpp"
#include "engine/tensor.hpp"

namespace patchbay::train {

struct Batch {
  engine::Tensor inputs;   // [rows, T] i32 (an encoder-decoder's: the decoder inputs)
  engine::Tensor targets;  // [rows, T] i32
  // Encoder-decoder objectives only (span_corruption); undefined otherwise. source [rows, S]
  // i32 is the encoder's input; the paddings are [rows, S] / [rows, T] i32, 1 = token,
  // 0 = padding (a padded target is kIgnoreTarget). train::forward_batch runs the model on it.
  engine::Tensor source;
  engine::Tensor source_padding;
  engine::Tensor target_padding;
  // Packed rows (docs/packing.md): undefined = each row is one sequence; else [rows, T] i32,
  // the segment (document or example) of every input position, non-decreasing along a row.
  // The model then runs LanguageModel::forward_packed: no attention across segments and
  // positions restarting at each (forward_batch in evaluator.hpp).
  engine::Tensor segment_ids;
};

// What the data reader hands a training objective (objective.hpp): rows windows of
// seq_len + 1 consecutive ids each, before any objective has made inputs and targets of them.
struct TokenWindows {
  engine::Tensor ids;  // [rows, T + 1] i32
  // Stream offset of each row's first id, where the reader knows it (every reader here).
  std::vector<uint64_t> starts;
  // [data] pack_documents: [rows, T + 1] i32, the document of each id, counted from 0 per row
  // (with_document_segments in window_sampler.hpp); undefined otherwise.
  engine::Tensor segment_ids;
};

// Offset of a training window's first id, in [0, count - seq_len). Throws Error
// (kInvalidArgument) when count < seq_len + 1 (the split is too short for one window).
uint64_t training_window_start(uint64_t seed, int64_t step, int64_t micro_step, int64_t row, uint64_t count,
                               int64_t seq_len);

// Start of validation window `index` of `window_count` (see above).
uint64_t validation_window_start(int64_t index, int64_t window_count, uint64_t count, int64_t seq_len);

// The windows of training micro-batch (step, micro_step): rows windows from
// training_window_start.
TokenWindows training_windows(const data::TokenSource& cache, uint64_t seed, int64_t step,
                              int64_t micro_step, int64_t rows, int64_t seq_len);

// The windows of validation batch `batch_index` of `batch_count`: windows batch_index*rows ..
// +rows of the batch_count*rows evenly spaced windows.
TokenWindows validation_windows(const data::TokenSource& cache, int64_t batch_index,
                                int64_t batch_count, int64_t rows, int64_t seq_len);

// Next-token prediction's batch of windows [rows, T + 1]: inputs = window[0 .. T),
// targets = window[1 .. T], and segment_ids = the windows' segments[0 .. T) when they have any
// (the target of a document's last position, the next document's first id, keeps its loss:
// it is predicted from that document alone, as a first token after end-of-text).
Batch causal_batch(const TokenWindows& windows);

// causal_batch(training_windows(...)): the training micro-batch (step, micro_step).
Batch training_batch(const data::TokenSource& cache, uint64_t seed, int64_t step, int64_t micro_step, int64_t rows,
                     int64_t seq_len);

// causal_batch(validation_windows(...)).
Batch validation_batch(const data::TokenSource& cache, int64_t batch_index, int64_t batch_count, int64_t rows,
                       int64_t seq_len);

// Random ids in [0, vocab_size) (benchmarks with --random-tokens), deterministic in (seed, step).
Batch random_batch(int64_t vocab_size, uint64_t seed, int64_t step, int64_t rows, int64_t seq_len);

}  // namespace patchbay::train
