// Token caches: a split encoded once with a tokenizer, stored flat and memory-mapped for
// reading by the trainer.
//
// File layout (all integers little-endian):
//   offset  size  field
//        0     8  magic "PBTOKENS"
//        8     4  version (1)
//       12     4  bytes per id: 2 (uint16, when vocab_size <= 65536) or 4 (uint32)
//       16     8  count: number of ids
//       24     8  vocab_size of the tokenizer
//       32     8  tokenizer_hash: fnv1a64 of the tokenizer's saved file
//       40     8  source_hash: fnv1a64 of the encoded text
//       48    16  tokenizer kind, NUL-padded ("bpe", "char")
//       64     .  count ids
// Written atomically (temporary file, then rename). The reader checks magic, version,
// dtype and that the file is exactly 64 + count * bytes-per-id long.
#pragma once

#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <span>
#include <string>
#include <vector>

#include "data/token_source.hpp"

namespace patchbay::data {

struct TokenCacheInfo {
  uint32_t bytes_per_id = 0;  // chosen by the writer from vocab_size
  uint64_t count = 0;
  uint64_t vocab_size = 0;
  uint64_t tokenizer_hash = 0;
  uint64_t source_hash = 0;
  std::string tokenizer_kind;  // at most 15 bytes
};

inline constexpr size_t kTokenCacheHeaderBytes = 64;
inline constexpr uint32_t kTokenCacheVersion = 1;

// Writes ids (each must lie in [0, info.vocab_size)); info.count and bytes_per_id are
// filled in from the ids and vocab_size. Throws Error(kInvalidArgument / kIo).
void write_token_cache(const std::filesystem::path& path, std::span<const int32_t> ids,
                       TokenCacheInfo info);

// A read-only memory map of a token cache. Move-only; unmaps on destruction.
// copy() first looks at the file's path: a file deleted under a running job (a disk cleaned,
// a dataset moved) or the mapped file truncated (its pages past the new end would raise
// SIGBUS) is an Error(kIo) naming the file and saying how to resume. A file replaced by a
// rename (another process writing the same token cache atomically) is not an error: the
// mapping keeps the old file, whole. (A truncation between the check and the copy itself can
// still fault; that window is one copy of T ids.)
class TokenCache final : public TokenSource {
 public:
  // Throws Error(kNotFound / kIo / kInvalidArgument) naming the file and the problem.
  static TokenCache open(const std::filesystem::path& path);
  ~TokenCache() override;
  TokenCache(TokenCache&& other) noexcept;
  TokenCache& operator=(TokenCache&& other) noexcept;
  TokenCache(const TokenCache&) = delete;
  TokenCache& operator=(const TokenCache&) = delete;

  const TokenCacheInfo& info() const { return info_; }
  size_t size() const override { return static_cast<size_t>(info_.count); }
  uint32_t operator[](size_t i) const {
    return info_.bytes_per_id == 2 ? static_cast<const uint16_t*>(ids_)[i]
                                   : static_cast<const uint32_t*>(ids_)[i];
  }
  // Copies ids [begin, begin + out.size()) into out (a training batch window).
  void copy(size_t begin, std::span<int32_t> out) const override;
  std::vector<int32_t> to_vector() const;

 private:
  TokenCache() = default;
  void unmap() noexcept;

  // Throws Error(kIo) when nothing is at path_ any more, or the mapped file got shorter.
  void check_still_there() const;

  void* mapping_ = nullptr;
  size_t mapping_bytes_ = 0;
  std::string path_;
  uint64_t device_ = 0, inode_ = 0;  // the mapped file's identity
  const void* ids_ = nullptr;
  TokenCacheInfo info_;
};

}  // namespace patchbay::data
