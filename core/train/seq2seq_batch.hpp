// The batch of an encoder-decoder objective (span_corruption, seq2seq) from (source, target)
// id lists, padded to the longest of each in the batch:
//   source, source_padding [rows, S]   the source ids, then pad_id; 1 on ids, 0 on padding
//   inputs                 [rows, L]   decoder inputs: pad_id (T5's decoder start), then
//                                      target[0, n-1); pad_id on padding
//   targets                [rows, L]   the target ids, kIgnoreTarget (-100) on padding
//   target_padding         [rows, L]
// Loss falls on target tokens only (the source is the encoder's, never predicted).
#pragma once

#include <cstdint>
#include <vector>

#include "train/batches.hpp"

namespace patchbay::train {

struct Seq2SeqExample {
  std::vector<int32_t> source;  // non-empty
  std::vector<int32_t> target;  // non-empty
};

Batch seq2seq_batch(const std::vector<Seq2SeqExample>& examples, int32_t pad_id);

}  // namespace patchbay::train
