// Token shards as `patchbay data prepare` writes them, one split's documents at a time.
//
// A shard is three files beside each other:
//   <split>-<nnnnn>.tokens  the ids, in the token-cache format (token_cache.hpp: uint16 when
//                           the vocabulary has at most 65,536 ids, else uint32), so
//                           TokenCache::open memory-maps it; header source_hash = fnv1a64 of
//                           the id bytes
//   <split>-<nnnnn>.idx     the document index: magic "PBDOCIDX", u32 version 1, u32 0,
//                           u64 n (documents), then n + 1 u64 token offsets (offset[0] = 0,
//                           offset[n] = the shard's token count); document i is ids
//                           [offset[i], offset[i+1]), its end-of-text token last
//   <split>-<nnnnn>.json    what the shard holds (documents, tokens, per-source counts, the
//                           options it was made with), for resuming and the manifest
// Ids stream into "<tokens>.partial" while the shard fills (bounded memory). finish() writes
// the index and the JSON (each temporary + fsync + rename), then patches the header, fsyncs
// and renames the .partial file to .tokens, and fsyncs the folder: a .tokens file exists only
// for a complete shard, whatever moment a kill -9 or a full disk strikes.
// Write failures throw Error(kIo) naming the file and the cause (a full disk says so).
#pragma once

#include <cstdint>
#include <filesystem>
#include <span>
#include <string>
#include <vector>

#include "data/token_cache.hpp"

namespace patchbay::data {

inline constexpr uint32_t kDocumentIndexVersion = 1;

class ShardWriter {
 public:
  // `header`: vocab_size, tokenizer_hash and tokenizer_kind (count, bytes_per_id and
  // source_hash are filled in).
  ShardWriter(std::filesystem::path tokens_file, TokenCacheInfo header);
  ~ShardWriter();  // an unfinished shard's .partial file is removed
  ShardWriter(const ShardWriter&) = delete;
  ShardWriter& operator=(const ShardWriter&) = delete;

  // Appends ids of the current document (each in [0, vocab_size)).
  void append(std::span<const int32_t> ids);
  // Ends the current document.
  void end_document();

  uint64_t tokens() const { return tokens_; }
  uint64_t documents() const { return offsets_.size() - 1; }
  uint64_t bytes() const { return kTokenCacheHeaderBytes + tokens_ * header_.bytes_per_id; }

  // Completes the shard as described above; `description` is the .json file's content.
  void finish(const std::string& description);

  static std::filesystem::path index_file(const std::filesystem::path& tokens_file);
  static std::filesystem::path description_file(const std::filesystem::path& tokens_file);
  static std::filesystem::path partial_file(const std::filesystem::path& tokens_file);

 private:
  void flush();
  void write_all(const void* data, size_t bytes, const char* what);

  std::filesystem::path file_;
  TokenCacheInfo header_;
  int fd_ = -1;
  std::vector<unsigned char> buffer_;
  uint64_t tokens_ = 0;
  uint64_t hash_;
  std::vector<uint64_t> offsets_{0};
  bool finished_ = false;
};

// A shard's document offsets (n + 1 values). Throws Error(kInvalidArgument) for a file that is
// not a document index, naming it.
std::vector<uint64_t> read_document_index(const std::filesystem::path& index_file);

// The message for a failed write of `file` (errno `err`): what happened and what to do.
std::string write_failure(const std::filesystem::path& file, int err);

}  // namespace patchbay::data
