// Reading the sources' documents as bounded pieces, and content hashing; see
// document_reader.hpp.
#include "data/document_reader.hpp"

#include <algorithm>
#include <cstring>

#include "data/split.hpp"

namespace patchbay::data {

void ContentHasher::update(std::string_view bytes) {
  fnv_ = fnv1a64(bytes, fnv_);
  length_ += bytes.size();
  size_t i = 0;
  while (i < bytes.size()) {
    const size_t take = std::min(sizeof tail_ - tail_size_, bytes.size() - i);
    std::memcpy(tail_ + tail_size_, bytes.data() + i, take);
    tail_size_ += take;
    i += take;
    if (tail_size_ == sizeof tail_) {
      uint64_t word = 0;
      std::memcpy(&word, tail_, sizeof word);
      words_ = splitmix64(words_ ^ word);
      tail_size_ = 0;
    }
  }
}

std::pair<uint64_t, uint64_t> ContentHasher::finish() {
  uint64_t word = 0;
  std::memcpy(&word, tail_, tail_size_);
  return {fnv_, splitmix64(splitmix64(words_ ^ word) ^ length_)};
}

std::pair<uint64_t, uint64_t> content_hash(std::string_view text) {
  ContentHasher h;
  h.update(text);
  return h.finish();
}

DocumentReader::DocumentReader(std::vector<SourceFile> files, ReaderOptions options)
    : files_(std::move(files)), options_(options) {}

uint64_t DocumentReader::bytes_read() const {
  return done_file_bytes_ +
         (reader_ ? std::min(reader_->file_bytes_read(), files_[current_].bytes) : 0);
}

std::string DocumentReader::document_name(const DocumentPiece& piece) const {
  const std::string& file = files_[piece.file].name;
  if (piece.line > 0) return file + ":" + std::to_string(piece.line);
  if (piece.block >= 0) return file + "#" + std::to_string(piece.block);
  return file;
}

bool DocumentReader::open_next_file() {
  if (next_file_ >= files_.size()) return false;
  current_ = static_cast<uint32_t>(next_file_++);
  reader_ = std::make_unique<BufferedReader>(open_input(files_[current_].path));
  has_ahead_ = false;
  document_open_ = false;
  block_ = 0;
  return true;
}

bool DocumentReader::read_text_piece(DocumentPiece& piece) {
  const size_t size = options_.block_bytes > 0 ? options_.block_bytes : options_.piece_bytes;
  piece.file = current_;
  if (document_open_) {  // the next piece of a document read in several
    piece.text = std::move(ahead_);
    has_ahead_ = reader_->next_piece(ahead_, size);
    piece.document = documents_ - 1;
    piece.first = false;
    piece.last = !has_ahead_;
    document_open_ = has_ahead_;
    return true;
  }
  const bool started = block_ > 0;  // this file has given a document already
  std::string text;
  if (!reader_->next_piece(text, size)) {
    if (started || options_.block_bytes > 0) return false;
    piece.text.clear();  // an empty file: one empty document (dropped and counted later)
    piece.document = documents_++;
    block_ = 1;
    return true;
  }
  piece.document = documents_++;
  piece.text = std::move(text);
  if (options_.block_bytes > 0) {
    piece.block = block_++;
    return true;
  }
  block_ = 1;
  has_ahead_ = reader_->next_piece(ahead_, size);
  piece.last = !has_ahead_;
  document_open_ = has_ahead_;
  if (has_ahead_ && options_.hash_documents) {  // a first pass: the whole file's hash
    BufferedReader again(open_input(files_[current_].path));
    ContentHasher hasher;
    std::string part;
    while (again.next_piece(part, size)) hasher.update(part);
    piece.hash = hasher.finish();
    piece.hash_known = true;
  }
  return true;
}

bool DocumentReader::next_piece(DocumentPiece& piece) {
  for (;;) {
    if (!reader_ && !open_next_file()) return false;
    piece = DocumentPiece{};
    const SourceFile& file = files_[current_];
    if (file.format == SourceFormat::kJsonLines) {
      std::string line;
      while (reader_->next_line(line)) {
        if (line.find_first_not_of(" \t\r") == std::string::npos) continue;  // blank line
        piece.file = current_;
        piece.line = reader_->line_number();
        piece.json = true;
        piece.document = documents_++;
        piece.text = std::move(line);
        return true;
      }
    } else if (read_text_piece(piece)) {
      return true;
    }
    done_file_bytes_ += file.bytes;
    reader_.reset();
  }
}

bool DocumentReader::next_chunk(std::vector<DocumentPiece>& pieces, size_t chunk_bytes) {
  size_t bytes = 0;
  bool any = false;
  DocumentPiece piece;
  while (bytes < chunk_bytes && next_piece(piece)) {
    bytes += piece.text.size() + 64;  // a little for each piece's bookkeeping
    pieces.push_back(std::move(piece));
    any = true;
  }
  return any;
}

}  // namespace patchbay::data
