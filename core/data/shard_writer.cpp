// Streaming token-shard writer and document-index reader; see shard_writer.hpp.
#include "data/shard_writer.hpp"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <fstream>

#include "common/error.hpp"
#include "data/split.hpp"
#include "run/atomic_file.hpp"

namespace patchbay::data {
namespace fs = std::filesystem;

namespace {

constexpr char kTokensMagic[8] = {'P', 'B', 'T', 'O', 'K', 'E', 'N', 'S'};
constexpr char kIndexMagic[8] = {'P', 'B', 'D', 'O', 'C', 'I', 'D', 'X'};
constexpr size_t kBufferBytes = 1 << 20;

void put_le(unsigned char* out, uint64_t value, size_t bytes) {
  for (size_t i = 0; i < bytes; ++i) out[i] = static_cast<unsigned char>((value >> (8 * i)) & 0xff);
}

std::string header_bytes(const TokenCacheInfo& info) {
  unsigned char h[kTokenCacheHeaderBytes] = {};
  std::memcpy(h, kTokensMagic, 8);
  put_le(h + 8, kTokenCacheVersion, 4);
  put_le(h + 12, info.bytes_per_id, 4);
  put_le(h + 16, info.count, 8);
  put_le(h + 24, info.vocab_size, 8);
  put_le(h + 32, info.tokenizer_hash, 8);
  put_le(h + 40, info.source_hash, 8);
  std::memcpy(h + 48, info.tokenizer_kind.data(), std::min<size_t>(15, info.tokenizer_kind.size()));
  return std::string(reinterpret_cast<const char*>(h), sizeof h);
}

void fsync_folder(const fs::path& folder) {
  const int dfd = ::open(folder.empty() ? "." : folder.c_str(), O_RDONLY | O_DIRECTORY);
  if (dfd >= 0) {
    ::fsync(dfd);
    ::close(dfd);
  }
}

}  // namespace

std::string write_failure(const fs::path& file, int err) {
  const bool full = err == ENOSPC || err == EDQUOT || err == EFBIG;
  return "cannot write '" + file.string() + "' (" + std::strerror(err) + "). " +
         (full ? "The disk is full (or a file-size limit was reached): free space, or give --out "
                 "a folder on another disk. "
               : "Check that the folder exists and is writable. ") +
         "The shards finished before are intact; run the same command again to resume after "
         "them.";
}

fs::path ShardWriter::index_file(const fs::path& tokens_file) {
  return fs::path(tokens_file).replace_extension(".idx");
}
fs::path ShardWriter::description_file(const fs::path& tokens_file) {
  return fs::path(tokens_file).replace_extension(".json");
}
fs::path ShardWriter::partial_file(const fs::path& tokens_file) {
  return tokens_file.string() + ".partial";
}

ShardWriter::ShardWriter(fs::path tokens_file, TokenCacheInfo header)
    : file_(std::move(tokens_file)), header_(std::move(header)), hash_(fnv1a64("")) {
  if (header_.tokenizer_kind.size() > 15)
    throw Error(ErrorKind::kInvalidArgument,
                "tokenizer kind '" + header_.tokenizer_kind + "' is longer than 15 bytes");
  header_.bytes_per_id = header_.vocab_size <= 65536 ? 2 : 4;
  const fs::path partial = partial_file(file_);
  fd_ = ::open(partial.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd_ < 0) throw Error(ErrorKind::kIo, write_failure(partial, errno));
  const std::string placeholder = header_bytes(header_);  // count patched in finish()
  write_all(placeholder.data(), placeholder.size(), "header");
  buffer_.reserve(kBufferBytes);
}

ShardWriter::~ShardWriter() {
  if (fd_ >= 0) ::close(fd_);
  if (!finished_) ::unlink(partial_file(file_).c_str());
}

void ShardWriter::write_all(const void* data, size_t bytes, const char*) {
  const char* p = static_cast<const char*>(data);
  while (bytes > 0) {
    const ssize_t n = ::write(fd_, p, bytes);
    if (n < 0) {
      if (errno == EINTR) continue;
      throw Error(ErrorKind::kIo, write_failure(partial_file(file_), errno));
    }
    p += n;
    bytes -= static_cast<size_t>(n);
  }
}

void ShardWriter::flush() {
  if (buffer_.empty()) return;
  hash_ = fnv1a64(std::string_view(reinterpret_cast<const char*>(buffer_.data()), buffer_.size()),
                  hash_);
  write_all(buffer_.data(), buffer_.size(), "ids");
  buffer_.clear();
}

void ShardWriter::append(std::span<const int32_t> ids) {
  const size_t width = header_.bytes_per_id;
  for (const int32_t id : ids) {
    if (id < 0 || static_cast<uint64_t>(id) >= header_.vocab_size)
      throw Error(ErrorKind::kInvalidArgument, "id " + std::to_string(id) + " is outside [0, " +
                                                   std::to_string(header_.vocab_size) +
                                                   ") of the tokenizer (" + file_.string() + ")");
    unsigned char le[4];
    put_le(le, static_cast<uint32_t>(id), width);
    buffer_.insert(buffer_.end(), le, le + width);
    if (buffer_.size() >= kBufferBytes) flush();
  }
  tokens_ += ids.size();
}

void ShardWriter::end_document() { offsets_.push_back(tokens_); }

void ShardWriter::finish(const std::string& description) {
  if (offsets_.back() != tokens_) end_document();  // ids after the last end: one more document
  flush();
  // The index and the description first: the .tokens file, renamed last, marks the shard done.
  run::write_file_atomically(index_file(file_), [&](run::AtomicWriter& w) {
    unsigned char head[24] = {};
    std::memcpy(head, kIndexMagic, 8);
    put_le(head + 8, kDocumentIndexVersion, 4);
    put_le(head + 16, offsets_.size() - 1, 8);
    w.write(head, sizeof head);
    std::vector<unsigned char> values(offsets_.size() * 8);
    for (size_t i = 0; i < offsets_.size(); ++i) put_le(values.data() + 8 * i, offsets_[i], 8);
    w.write(values.data(), values.size());
  });
  run::write_text_atomically(description_file(file_), description);
  header_.count = tokens_;
  header_.source_hash = hash_;
  const std::string header = header_bytes(header_);
  const fs::path partial = partial_file(file_);
  if (::pwrite(fd_, header.data(), header.size(), 0) != static_cast<ssize_t>(header.size()) ||
      ::fsync(fd_) != 0)
    throw Error(ErrorKind::kIo, write_failure(partial, errno));
  if (::close(fd_) != 0) {
    fd_ = -1;
    throw Error(ErrorKind::kIo, write_failure(partial, errno));
  }
  fd_ = -1;
  if (::rename(partial.c_str(), file_.c_str()) != 0)
    throw Error(ErrorKind::kIo, write_failure(file_, errno));
  finished_ = true;
  fsync_folder(file_.parent_path());
}

std::vector<uint64_t> read_document_index(const fs::path& index_file) {
  std::ifstream in(index_file, std::ios::binary);
  if (!in)
    throw Error(ErrorKind::kNotFound, "cannot open document index '" + index_file.string() + "'");
  auto bad = [&](const std::string& what) {
    return Error(ErrorKind::kInvalidArgument,
                 "'" + index_file.string() + "' is not a valid document index: " + what +
                     "; prepare the data again (patchbay data prepare)");
  };
  unsigned char head[24];
  if (!in.read(reinterpret_cast<char*>(head), sizeof head)) throw bad("shorter than its header");
  if (std::memcmp(head, kIndexMagic, 8) != 0) throw bad("wrong magic");
  auto le = [](const unsigned char* p, size_t n) {
    uint64_t v = 0;
    for (size_t i = 0; i < n; ++i) v |= static_cast<uint64_t>(p[i]) << (8 * i);
    return v;
  };
  if (le(head + 8, 4) != kDocumentIndexVersion) throw bad("unknown version");
  const uint64_t documents = le(head + 16, 8);
  std::vector<uint64_t> offsets(documents + 1);
  std::vector<unsigned char> raw(offsets.size() * 8);
  if (!in.read(reinterpret_cast<char*>(raw.data()), static_cast<std::streamsize>(raw.size())))
    throw bad("shorter than its " + std::to_string(documents) + " documents' offsets");
  for (size_t i = 0; i < offsets.size(); ++i) offsets[i] = le(raw.data() + 8 * i, 8);
  for (size_t i = 1; i < offsets.size(); ++i)
    if (offsets[i] < offsets[i - 1]) throw bad("offsets decrease at document " + std::to_string(i));
  return offsets;
}

}  // namespace patchbay::data
