// Reading source files as byte streams with bounded memory: plain files, gzip (".gz", through
// zlib) and zstd (".zst", through libzstd) decompressed on the fly, by extension. On top, a
// line reader for JSON Lines that keeps one line in memory (with its 1-based number), and a
// piece reader that cuts a long text into pieces of about `piece_bytes` ending at a newline
// (or, with no newline in reach, at a UTF-8 character boundary), so a file of any size is read
// and encoded in bounded pieces.
// Errors: patchbay::Error(kNotFound) for a missing file, kIo for a read or decompression
// failure (naming the file; a truncated or corrupt .gz/.zst says so).
#pragma once

#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <memory>
#include <string>

namespace patchbay::data {

enum class Compression { kNone, kGzip, kZstd };

// By the file name's last extension (".gz", ".zst"; anything else: none).
Compression compression_of(const std::filesystem::path& file);
// The name without a compression extension ("a.jsonl.gz" -> "a.jsonl").
std::filesystem::path without_compression(const std::filesystem::path& file);

class InputStream {
 public:
  virtual ~InputStream() = default;
  // Reads up to `capacity` bytes into `out`; returns 0 only at the end of the stream.
  virtual size_t read(char* out, size_t capacity) = 0;
  // Compressed bytes consumed so far (the file's bytes; for progress).
  virtual uint64_t file_bytes_read() const = 0;
  const std::filesystem::path& path() const { return path_; }

 protected:
  explicit InputStream(std::filesystem::path path) : path_(std::move(path)) {}
  std::filesystem::path path_;
};

// Opens `file`, decompressing by its extension.
std::unique_ptr<InputStream> open_input(const std::filesystem::path& file);

// Buffered reading on an InputStream: whole lines (JSONL) or newline-cut pieces (text).
class BufferedReader {
 public:
  explicit BufferedReader(std::unique_ptr<InputStream> stream, size_t buffer_bytes = 1 << 20);

  // Next line without its '\n' (a final line without one counts too; "\r\n" keeps the '\r');
  // false at the end. line_number() is then its 1-based number.
  bool next_line(std::string& line);
  int64_t line_number() const { return line_number_; }

  // Next piece of at most about piece_bytes (longer only when no newline and no character
  // boundary is in reach); false at the end.
  bool next_piece(std::string& piece, size_t piece_bytes);

  uint64_t file_bytes_read() const { return stream_->file_bytes_read(); }

 private:
  bool fill();  // appends to buffer_ from the stream; false at the end

  std::unique_ptr<InputStream> stream_;
  std::string buffer_;
  size_t begin_ = 0;
  size_t chunk_;
  bool at_end_ = false;
  int64_t line_number_ = 0;
};

}  // namespace patchbay::data
