// Plain / gzip / zstd input streams and the buffered line and piece readers; see
// input_stream.hpp.
#include "data/input_stream.hpp"

#include <zlib.h>
#include <zstd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <vector>

#include "common/error.hpp"

namespace patchbay::data {
namespace fs = std::filesystem;

namespace {

Error read_error(const fs::path& file, const std::string& what) {
  return Error(ErrorKind::kIo, "reading '" + file.string() + "' failed: " + what);
}

std::FILE* open_file(const fs::path& file) {
  std::FILE* f = std::fopen(file.c_str(), "rb");
  if (f == nullptr)
    throw Error(errno == ENOENT ? ErrorKind::kNotFound : ErrorKind::kIo,
                "cannot open '" + file.string() + "': " + std::strerror(errno) +
                    (errno == ENOENT ? " (did the source vanish while preparing?)" : ""));
  return f;
}

class PlainInput final : public InputStream {
 public:
  explicit PlainInput(const fs::path& file) : InputStream(file), file_(open_file(file)) {}
  ~PlainInput() override { std::fclose(file_); }
  size_t read(char* out, size_t capacity) override {
    const size_t n = std::fread(out, 1, capacity, file_);
    if (n == 0 && std::ferror(file_)) throw read_error(path_, std::strerror(errno));
    bytes_ += n;
    return n;
  }
  uint64_t file_bytes_read() const override { return bytes_; }

 private:
  std::FILE* file_;
  uint64_t bytes_ = 0;
};

class GzipInput final : public InputStream {
 public:
  explicit GzipInput(const fs::path& file) : InputStream(file) {
    std::fclose(open_file(file));  // the same "cannot open" message as plain files
    gz_ = gzopen(file.c_str(), "rb");
    if (gz_ == nullptr) throw read_error(file, "zlib could not open it");
    gzbuffer(gz_, 1 << 17);
  }
  ~GzipInput() override { gzclose(gz_); }
  size_t read(char* out, size_t capacity) override {
    const int n = gzread(gz_, out, static_cast<unsigned>(std::min<size_t>(capacity, 1u << 30)));
    if (n < 0) {
      int code = 0;
      const char* message = gzerror(gz_, &code);
      throw read_error(path_, std::string("gzip: ") + (message != nullptr ? message : "error") +
                                  " (a truncated or corrupt .gz file?)");
    }
    return static_cast<size_t>(n);
  }
  uint64_t file_bytes_read() const override {
    const z_off_t offset = gzoffset(gz_);
    return offset > 0 ? static_cast<uint64_t>(offset) : 0;
  }

 private:
  gzFile gz_ = nullptr;
};

class ZstdInput final : public InputStream {
 public:
  explicit ZstdInput(const fs::path& file)
      : InputStream(file), file_(open_file(file)), stream_(ZSTD_createDStream()) {
    in_buffer_.resize(ZSTD_DStreamInSize());
    ZSTD_initDStream(stream_);
  }
  ~ZstdInput() override {
    ZSTD_freeDStream(stream_);
    std::fclose(file_);
  }
  size_t read(char* out, size_t capacity) override {
    ZSTD_outBuffer output{out, capacity, 0};
    while (output.pos == 0) {
      if (input_.pos == input_.size) {
        const size_t n = std::fread(in_buffer_.data(), 1, in_buffer_.size(), file_);
        if (n == 0) {
          if (std::ferror(file_)) throw read_error(path_, std::strerror(errno));
          if (!frame_done_)
            throw read_error(path_, "zstd: the file ends inside a frame (truncated .zst file?)");
          return 0;
        }
        bytes_ += n;
        input_ = ZSTD_inBuffer{in_buffer_.data(), n, 0};
      }
      const size_t status = ZSTD_decompressStream(stream_, &output, &input_);
      if (ZSTD_isError(status))
        throw read_error(
            path_, std::string("zstd: ") + ZSTD_getErrorName(status) + " (a corrupt .zst file?)");
      frame_done_ = status == 0;
    }
    return output.pos;
  }
  uint64_t file_bytes_read() const override { return bytes_; }

 private:
  std::FILE* file_;
  ZSTD_DStream* stream_;
  std::vector<char> in_buffer_;
  ZSTD_inBuffer input_{nullptr, 0, 0};
  uint64_t bytes_ = 0;
  bool frame_done_ = true;
};

// Length of the prefix of text[0, end) that ends on a UTF-8 character boundary (a position
// that is not a continuation byte 10xxxxxx); end itself when nothing better is near.
size_t utf8_boundary(const std::string& text, size_t begin, size_t end) {
  for (size_t back = 0; back < 4 && end - back > begin; ++back) {
    const auto c = static_cast<unsigned char>(text[end - back]);
    if ((c & 0xc0) != 0x80) return end - back;
  }
  return end;
}

}  // namespace

Compression compression_of(const fs::path& file) {
  const std::string ext = file.extension().string();
  if (ext == ".gz") return Compression::kGzip;
  if (ext == ".zst") return Compression::kZstd;
  return Compression::kNone;
}

fs::path without_compression(const fs::path& file) {
  return compression_of(file) == Compression::kNone ? file : fs::path(file).replace_extension();
}

std::unique_ptr<InputStream> open_input(const fs::path& file) {
  switch (compression_of(file)) {
    case Compression::kGzip:
      return std::make_unique<GzipInput>(file);
    case Compression::kZstd:
      return std::make_unique<ZstdInput>(file);
    case Compression::kNone:
      break;
  }
  return std::make_unique<PlainInput>(file);
}

BufferedReader::BufferedReader(std::unique_ptr<InputStream> stream, size_t buffer_bytes)
    : stream_(std::move(stream)), chunk_(buffer_bytes) {}

bool BufferedReader::fill() {
  if (at_end_) return false;
  if (begin_ > 0) {  // drop what was consumed
    buffer_.erase(0, begin_);
    begin_ = 0;
  }
  const size_t old = buffer_.size();
  buffer_.resize(old + chunk_);
  const size_t n = stream_->read(buffer_.data() + old, chunk_);
  buffer_.resize(old + n);
  if (n == 0) at_end_ = true;
  return n > 0;
}

bool BufferedReader::next_line(std::string& line) {
  size_t searched = begin_;
  for (;;) {
    const size_t newline = buffer_.find('\n', searched);
    if (newline != std::string::npos) {
      line.assign(buffer_, begin_, newline - begin_);
      begin_ = newline + 1;
      ++line_number_;
      return true;
    }
    searched = buffer_.size() - begin_;  // relative: fill() moves the data to the front
    if (!fill()) break;
  }
  if (begin_ >= buffer_.size()) return false;
  line.assign(buffer_, begin_, std::string::npos);  // a last line without '\n'
  begin_ = buffer_.size();
  ++line_number_;
  return true;
}

bool BufferedReader::next_piece(std::string& piece, size_t piece_bytes) {
  while (buffer_.size() - begin_ < piece_bytes && fill()) {
  }
  const size_t available = buffer_.size() - begin_;
  if (available == 0) return false;
  size_t length = available;
  if (available > piece_bytes) {
    const size_t end = begin_ + piece_bytes;
    const size_t newline = buffer_.rfind('\n', end - 1);
    if (newline != std::string::npos && newline >= begin_ + piece_bytes / 2) {
      length = newline + 1 - begin_;  // the piece ends with its newline
    } else {
      length = utf8_boundary(buffer_, begin_, end) - begin_;
      if (length == 0) length = piece_bytes;
    }
  }
  piece.assign(buffer_, begin_, length);
  begin_ += length;
  return true;
}

}  // namespace patchbay::data
