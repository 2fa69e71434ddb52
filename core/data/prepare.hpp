// Streaming preparation of a token dataset (`patchbay data prepare --source ...`): sources
// (text files, folders, JSON Lines, gzip / zstd compressed) -> documents -> ids with the
// tokenizer's end-of-text token after each document -> token shards per split, a document
// index per shard, and manifest.json. Memory stays bounded whatever the corpus size: the
// input is read in chunks of about chunk_bytes, each held by one worker thread while it is
// parsed, hashed, encoded and written (at most `threads` chunks in flight).
//
// Pipeline per chunk (every worker takes the next chunk from the reader in turn):
//   parse + hash     parallel   JSON Lines field extraction, content hashes for --dedup
//   decide           in order   bad line (error naming file:line, or skipped and counted),
//                               empty document (dropped, counted), duplicate (dropped,
//                               counted), split by document-name hash, resumed or new
//   encode           parallel   tokenizer.encode of every new piece
//   write            in order   ids into the split's current shard; a shard is finished at
//                               the first document end at or past shard_bytes
// The output is a pure function of the sources and the options below (never of threads or
// timing): an interrupted run, run again with the same command, produces the same files.
//
// Split rule (as data/split.hpp): h = splitmix64(fnv1a64(document name) ^ seed); validation
// when h < val_fraction * 2^64, test when h < (val_fraction + test_fraction) * 2^64, else
// train. With streaming there is no second look: a split that gets no document is reported.
//
// Resume: shards finish atomically (shard_writer.hpp). A new run first removes unfinished
// files (*.partial, *.tmp-*), checks every finished shard's description against this run's
// options — shards made with another tokenizer are refused naming both hashes — and then
// re-reads the sources, re-deciding every document (cheap) but encoding and writing only
// those after the finished shards. A shard's last document name is checked on the way, so
// sources that changed since are refused, not mixed in.
//
// manifest.json (written last, atomically) holds the tokenizer (kind, file, hash, vocabulary,
// end-of-text id), the id width, the options, per-source files / bytes / documents / tokens /
// drops, and per split its shards with their token and document counts.
#pragma once

#include <cstdint>
#include <filesystem>
#include <functional>
#include <string>
#include <vector>

#include "data/source_files.hpp"
#include "runtime/component_instance.hpp"

namespace patchbay::data {

struct PrepareOptions {
  std::vector<SourceSpec> sources;
  std::filesystem::path out;
  uint64_t shard_bytes = 64ull << 20;  // token bytes per shard (whole documents)
  double val_fraction = 0.05;
  double test_fraction = 0.0;
  uint64_t seed = 0;
  bool dedup_exact = false;
  bool skip_bad = false;         // bad JSON Lines lines: skipped and counted instead of an error
  size_t block_bytes = 0;        // > 0: text files cut into documents of about this size
  size_t piece_bytes = 1 << 20;  // text documents are encoded in pieces of about this size
  size_t chunk_bytes = 1 << 20;  // input per worker task (does not change the output)
  int threads = 0;               // 0: every core
  std::string eot_token = "<|endoftext|>";
  bool overwrite = false;  // remove what `out` holds first
};

struct PrepareTokenizer {
  const runtime::TokenizerHandle* tokenizer = nullptr;
  std::string kind;
  std::filesystem::path file;  // the saved tokenizer (its bytes' fnv1a64 is the hash)
};

struct SourceReport {
  std::string path;
  uint64_t files = 0, bytes = 0, documents = 0, tokens = 0;  // kept documents' text bytes
  uint64_t duplicates = 0, empty = 0, bad = 0;
};

struct SplitReport {
  std::string name;  // "train", "val", "test"
  uint64_t documents = 0, tokens = 0, shards = 0;
};

struct PrepareReport {
  std::vector<SourceReport> sources;
  std::vector<SplitReport> splits;
  uint64_t input_bytes = 0;       // of the files (compressed sizes for .gz / .zst)
  uint64_t resumed_shards = 0;    // finished by an earlier run and kept
  bool already_complete = false;  // the manifest was there with these options: nothing done
  double seconds = 0;
  std::filesystem::path manifest;
  uint32_t bytes_per_id = 2;
};

struct PrepareProgress {
  uint64_t bytes_read = 0, total_bytes = 0, tokens_written = 0;
};

// Prepares as described above. Throws Error naming the file (and line) for bad input, a
// full disk, a tokenizer without the end-of-text token, or an output folder holding another
// preparation. `progress` (optional) is called after each chunk is written, in order.
PrepareReport prepare_dataset(const PrepareOptions& options, const PrepareTokenizer& tokenizer,
                              const std::function<void(const PrepareProgress&)>& progress = {});

// The split of a document name (0 train, 1 val, 2 test).
int document_split(const std::string& name, double val_fraction, double test_fraction,
                   uint64_t seed);

inline constexpr const char* kSplitNames[3] = {"train", "val", "test"};
// "<split>-<nnnnn>.tokens"
std::string shard_file_name(int split, uint64_t shard);

}  // namespace patchbay::data
