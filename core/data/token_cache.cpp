// Token cache writer and memory-mapped reader; layout in token_cache.hpp.
#include "data/token_cache.hpp"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstring>
#include <utility>

#include "common/error.hpp"
#include "data/split.hpp"
#include "run/atomic_file.hpp"

namespace patchbay::data {
namespace {

constexpr char kMagic[8] = {'P', 'B', 'T', 'O', 'K', 'E', 'N', 'S'};

void put_le(std::string& out, uint64_t value, size_t bytes) {
  for (size_t i = 0; i < bytes; ++i) out.push_back(static_cast<char>((value >> (8 * i)) & 0xff));
}

uint64_t get_le(const unsigned char* p, size_t bytes) {
  uint64_t value = 0;
  for (size_t i = 0; i < bytes; ++i) value |= static_cast<uint64_t>(p[i]) << (8 * i);
  return value;
}

}  // namespace

void write_token_cache(const std::filesystem::path& path, std::span<const int32_t> ids,
                       TokenCacheInfo info) {
  if (info.tokenizer_kind.size() > 15) {
    throw Error(ErrorKind::kInvalidArgument, "tokenizer kind '" + info.tokenizer_kind + "' is longer than 15 bytes");
  }
  info.bytes_per_id = info.vocab_size <= 65536 ? 2 : 4;
  info.count = ids.size();
  std::string bytes;
  bytes.reserve(kTokenCacheHeaderBytes + ids.size() * info.bytes_per_id);
  bytes.append(kMagic, sizeof kMagic);
  put_le(bytes, kTokenCacheVersion, 4);
  put_le(bytes, info.bytes_per_id, 4);
  put_le(bytes, info.count, 8);
  put_le(bytes, info.vocab_size, 8);
  put_le(bytes, info.tokenizer_hash, 8);
  put_le(bytes, info.source_hash, 8);
  std::string kind = info.tokenizer_kind;
  kind.resize(16, '\0');
  bytes += kind;
  for (size_t i = 0; i < ids.size(); ++i) {
    const int32_t id = ids[i];
    if (id < 0 || static_cast<uint64_t>(id) >= info.vocab_size) {
      throw Error(ErrorKind::kInvalidArgument, "id " + std::to_string(id) + " at position " + std::to_string(i) +
                                                   " is outside [0, " + std::to_string(info.vocab_size) + ")");
    }
    put_le(bytes, static_cast<uint32_t>(id), info.bytes_per_id);
  }
  run::write_text_atomically(path, bytes);
}

TokenCache TokenCache::open(const std::filesystem::path& path) {
  const std::string name = path.string();
  const int fd = ::open(name.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) throw Error(ErrorKind::kNotFound, "cannot open token cache '" + name + "': " + std::strerror(errno));
  struct stat st {};
  if (::fstat(fd, &st) != 0) {
    ::close(fd);
    throw Error(ErrorKind::kIo, "cannot stat token cache '" + name + "'");
  }
  const auto file_bytes = static_cast<size_t>(st.st_size);
  auto bad = [&](const std::string& what) {
    return Error(ErrorKind::kInvalidArgument, "'" + name + "' is not a valid token cache: " + what +
                                                  "; re-create it with `patchbay data encode`");
  };
  if (file_bytes < kTokenCacheHeaderBytes) {
    ::close(fd);
    throw bad("shorter than its 64-byte header");
  }
  void* mapping = ::mmap(nullptr, file_bytes, PROT_READ, MAP_PRIVATE, fd, 0);
  ::close(fd);
  if (mapping == MAP_FAILED) throw Error(ErrorKind::kIo, "cannot mmap token cache '" + name + "'");
  TokenCache cache;
  cache.mapping_ = mapping;
  cache.mapping_bytes_ = file_bytes;
  cache.path_ = name;
  cache.device_ = static_cast<uint64_t>(st.st_dev);
  cache.inode_ = static_cast<uint64_t>(st.st_ino);
  const auto* header = static_cast<const unsigned char*>(mapping);
  if (std::memcmp(header, kMagic, sizeof kMagic) != 0) throw bad("wrong magic (expected PBTOKENS)");
  const auto version = static_cast<uint32_t>(get_le(header + 8, 4));
  if (version != kTokenCacheVersion) throw bad("version " + std::to_string(version) + ", this build reads 1");
  cache.info_.bytes_per_id = static_cast<uint32_t>(get_le(header + 12, 4));
  if (cache.info_.bytes_per_id != 2 && cache.info_.bytes_per_id != 4) throw bad("bytes per id is neither 2 nor 4");
  cache.info_.count = get_le(header + 16, 8);
  cache.info_.vocab_size = get_le(header + 24, 8);
  cache.info_.tokenizer_hash = get_le(header + 32, 8);
  cache.info_.source_hash = get_le(header + 40, 8);
  const char* kind = reinterpret_cast<const char*>(header + 48);
  cache.info_.tokenizer_kind.assign(kind, strnlen(kind, 16));
  if (kTokenCacheHeaderBytes + cache.info_.count * cache.info_.bytes_per_id != file_bytes) {
    throw bad("header says " + std::to_string(cache.info_.count) + " ids but the file holds " +
              std::to_string(file_bytes) + " bytes (truncated?)");
  }
  cache.ids_ = header + kTokenCacheHeaderBytes;
  ::madvise(mapping, file_bytes, MADV_WILLNEED);
  return cache;
}

TokenCache::~TokenCache() { unmap(); }

TokenCache::TokenCache(TokenCache&& other) noexcept { *this = std::move(other); }

TokenCache& TokenCache::operator=(TokenCache&& other) noexcept {
  if (this != &other) {
    unmap();
    mapping_ = std::exchange(other.mapping_, nullptr);
    mapping_bytes_ = std::exchange(other.mapping_bytes_, 0);
    path_ = std::move(other.path_);
    device_ = other.device_;
    inode_ = other.inode_;
    ids_ = std::exchange(other.ids_, nullptr);
    info_ = std::move(other.info_);
  }
  return *this;
}

void TokenCache::unmap() noexcept {
  if (mapping_ != nullptr) ::munmap(mapping_, mapping_bytes_);
  mapping_ = nullptr;
}

void TokenCache::check_still_there() const {
  struct stat st {};
  const std::string advice =
      ": the data changed under the running job. Restore it (or prepare it again exactly as before) and "
      "resume from the last checkpoint (patchbay train --resume RUN_DIR)";
  if (::stat(path_.c_str(), &st) != 0)
    throw Error(ErrorKind::kIo, "token file '" + path_ + "' vanished while in use (" + std::strerror(errno) + ")" +
                                    advice);
  const bool same_file = static_cast<uint64_t>(st.st_dev) == device_ && static_cast<uint64_t>(st.st_ino) == inode_;
  if (same_file && static_cast<size_t>(st.st_size) < mapping_bytes_)
    throw Error(ErrorKind::kIo, "token file '" + path_ + "' was truncated while in use (" +
                                    std::to_string(st.st_size) + " of its " + std::to_string(mapping_bytes_) +
                                    " bytes left)" + advice);
}

void TokenCache::copy(size_t begin, std::span<int32_t> out) const {
  if (begin > size() || out.size() > size() - begin) {
    throw Error(ErrorKind::kInvalidArgument, "token window [" + std::to_string(begin) + ", " +
                                                 std::to_string(begin + out.size()) + ") outside the cache's " +
                                                 std::to_string(size()) + " ids");
  }
  check_still_there();
  for (size_t i = 0; i < out.size(); ++i) out[i] = static_cast<int32_t>((*this)[begin + i]);
}

std::vector<int32_t> TokenCache::to_vector() const {
  std::vector<int32_t> ids(size());
  copy(0, ids);
  return ids;
}

}  // namespace patchbay::data
