// A folder made by `patchbay data prepare --source ...` (prepare.hpp), opened for training:
// its manifest read and checked (complete, the format this build writes), the tokenizer it
// was prepared with, and each split's shards as one memory-mapped stream (token_sequence.hpp).
#pragma once

#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

#include "data/token_sequence.hpp"

namespace patchbay::data {

struct PreparedDataset {
  std::filesystem::path folder;
  std::string tokenizer_kind;
  std::filesystem::path tokenizer_file;  // as the manifest records it (absolute)
  uint64_t tokenizer_hash = 0;           // fnv1a64 of that file when it was prepared
  int64_t vocab_size = 0;
  int32_t eot_id = -1;
  uint64_t bytes[3] = {0, 0, 0};   // per split (train, val, test): text bytes of its documents
  uint64_t tokens[3] = {0, 0, 0};  // per split
  std::vector<std::filesystem::path> shards[3];  // per split, in order
};

// Reads <folder>/manifest.json. Throws Error(kNotFound) when there is none (saying how to make
// one), kInvalidArgument when it is incomplete (an interrupted preparation: run it again) or of
// another format.
PreparedDataset open_prepared_dataset(const std::filesystem::path& folder);

// The shards of `split` (0 train, 1 val, 2 test) as one stream, each file's header checked
// against the manifest's tokenizer hash; with_documents loads the document starts.
TokenSequence open_split(const PreparedDataset& dataset, int split, bool with_documents);

}  // namespace patchbay::data
