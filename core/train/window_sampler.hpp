// Which windows of the training stream a micro-batch reads ([data] sampling):
//
//   "random"    (the single-corpus form's default) start(seed, step, micro, row) =
//               splitmix64-chain mod (N - T), with replacement (batches.hpp);
//   "epochs"    (a prepared dataset's default) the stream of N ids is cut into
//               W = floor((N - 1) / T) packed windows, window w = ids [w T, w T + T + 1)
//               (documents run into each other, separated by their end-of-text token); sample
//               g = (step * G + micro) * B + row (B rows of the global batch, G micro-batches
//               per step) reads window perm_e(g mod W) of epoch e = floor(g / W): every window
//               once per epoch, a new order each epoch;
//   "documents" the same over the D documents (their start offsets, from the shards' document
//               indexes): a window of T + 1 ids starting at document perm_e(g mod D) (moved
//               back to N - T - 1 when it would run past the end).
// perm_e is a seeded bijection of [0, n) computed on the fly (a 4-round Feistel network on
// the next even power of two, cycle-walking back into [0, n)), keyed by (seed, epoch): no
// table, O(1) memory. So the windows of any (step, micro) are a pure function of (seed,
// step, micro) and the global batch shape: a resumed run reads exactly what an uninterrupted
// one would, and so does a run on another number of MPI ranks (each rank keeps its rows of
// the global batch).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "data/token_source.hpp"
#include "train/batches.hpp"

namespace patchbay::train {

enum class Sampling { kRandom, kEpochs, kDocuments };

// "random", "epochs", "documents"; throws Error(kInvalidArgument) otherwise.
Sampling sampling_from_name(const std::string& name);
std::string sampling_name(Sampling sampling);

// Position p in [0, n) of a seeded permutation of [0, n) (see above).
uint64_t permuted_index(uint64_t p, uint64_t n, uint64_t key);

class WindowSampler {
 public:
  // `document_starts` is needed (non-empty) for kDocuments only; `rows` is the global batch's
  // rows B and `accum` its micro-batches per step G.
  WindowSampler(const data::TokenSource& stream, std::vector<uint64_t> document_starts,
                Sampling sampling, int64_t rows, int64_t accum, int64_t seq_len);

  // The windows [rows, T + 1] of training micro-batch (step, micro).
  TokenWindows training_windows(uint64_t seed, int64_t step, int64_t micro) const;

  // Start offset of global sample g's window (kEpochs / kDocuments).
  uint64_t window_start(uint64_t seed, uint64_t sample) const;

  // Epochs completed after `steps` optimizer steps (fractional); nullopt for kRandom.
  std::optional<double> epochs_after(int64_t steps) const;
  // Units an epoch has: windows (kEpochs) or documents (kDocuments); 0 for kRandom.
  uint64_t epoch_size() const { return units_; }
  Sampling sampling() const { return sampling_; }
  // One line for checkpoints' metadata.
  std::string rule() const;

 private:
  const data::TokenSource& stream_;
  std::vector<uint64_t> document_starts_;
  Sampling sampling_;
  int64_t rows_, accum_, seq_len_;
  uint64_t units_ = 0;
};

// [data] pack_documents (docs/packing.md): `windows` with segment_ids [rows, T + 1] marking
// the documents of each row from the stream's document starts (ascending global offsets):
// segment 0 up to the first document start inside the window, then one more at each. Needs
// windows.starts (every single-stream reader sets them). Throws Error(kInvalidArgument) when
// there are no document starts.
TokenWindows with_document_segments(TokenWindows windows,
                                    const std::vector<uint64_t>& document_starts);

}  // namespace patchbay::train
