// Recording the batches a run trains on (`patchbay train --record-batches FILE`), so that
// another implementation can be fed exactly the same token ids, loss masks and order — the
// side-by-side benchmark against PyTorch + PEFT (scripts/finetune/bench_lora_peft.py) does.
//
// FILE is JSON Lines, one line per training micro-batch of the whole global batch (before a
// rank keeps its rows), in the order they are trained:
//   {"step": 0, "micro": 0, "inputs": [[i32 x T] x rows], "targets": [[i32 x T] x rows]}
// plus "segment_ids" [[i32 x T] x rows] when the batch is packed (docs/packing.md) and
// "source" [[i32 x S] x rows] for an encoder-decoder batch. targets hold -100 (kIgnoreTarget)
// where no loss is taken; the loss of the micro-batch is the mean cross-entropy over the
// others. A fresh run truncates FILE, a resumed one appends, so the file of a run resumed in
// pieces holds every step once.
#pragma once

#include <cstdint>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "train/batches.hpp"

namespace patchbay::train {

// The line of one micro-batch (see above). Tensors must be CPU i32 [rows, n].
nlohmann::json batch_record(int64_t step, int64_t micro, const Batch& batch);

class BatchRecorder {
 public:
  // Opens `file` (truncated, or appended to when `append`); throws Error(kIo) naming it when it
  // cannot be written.
  BatchRecorder(const std::filesystem::path& file, bool append);
  // Writes one line and flushes it (a run that stops still leaves whole lines).
  void record(int64_t step, int64_t micro, const Batch& batch);

 private:
  std::filesystem::path file_;
  std::ofstream out_;
};

}  // namespace patchbay::train
