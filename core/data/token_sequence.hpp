// A split read as one stream of ids: its token files (the shards of a prepared dataset, or a
// single token cache) memory-mapped in order, and, where the shards have document indexes
// (shard_writer.hpp), the global offsets at which documents start. Nothing is read into
// memory but the offsets (8 bytes a document, loaded only when asked for).
#pragma once

#include <cstdint>
#include <filesystem>
#include <span>
#include <string>
#include <vector>

#include "data/token_cache.hpp"
#include "data/token_source.hpp"

namespace patchbay::data {

class TokenSequence final : public TokenSource {
 public:
  TokenSequence() = default;
  // Opens `files` in order. With expected_tokenizer_hash != 0, every file's header must carry
  // that hash: a file encoded with another tokenizer is refused, naming both hashes.
  // with_documents: reads each file's ".idx" document index too (refused when one is missing).
  static TokenSequence open(const std::vector<std::filesystem::path>& files,
                            uint64_t expected_tokenizer_hash = 0, bool with_documents = false);
  // One token cache as a sequence (the single-corpus [data] form).
  static TokenSequence of(TokenCache cache);

  size_t size() const override { return static_cast<size_t>(begins_.empty() ? 0 : begins_.back()); }
  void copy(size_t begin, std::span<int32_t> out) const override;
  std::vector<int32_t> to_vector() const;

  // Global offsets of document starts, ascending (empty unless opened with_documents).
  const std::vector<uint64_t>& document_starts() const { return document_starts_; }
  const std::vector<TokenCache>& files() const { return files_; }

 private:
  void add(TokenCache cache);

  std::vector<TokenCache> files_;
  std::vector<uint64_t> begins_{0};  // begins_[i]: global offset of file i's first id; last: size
  std::vector<uint64_t> document_starts_;
};

}  // namespace patchbay::data
