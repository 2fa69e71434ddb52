// The documents of `patchbay data prepare`'s source files, read in order as bounded pieces.
//
// What a document is:
//   - JSON Lines: one line (blank lines are not documents); its text is the named string
//     field, extracted later (by a worker: parsing runs in parallel), named "<file>:<line>";
//   - text, default: the whole file, named by the file; read in pieces of about piece_bytes
//     ending at a newline, each encoded on its own (so a file of any size needs bounded
//     memory; the pieces' ids are concatenated);
//   - text with block_bytes > 0: blocks of about block_bytes ending at a newline, block i of
//     file F named "F#i" (for corpora that are one huge file).
// Every piece carries its document's ordinal (in input order, before any is dropped), and
// whether it is the document's first and last piece. With hashing on, a document read in
// several pieces has its content hash computed by a first pass over the file, so that the
// decision to drop a duplicate is known at its first piece.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "data/input_stream.hpp"
#include "data/source_files.hpp"

namespace patchbay::data {

// 128-bit content hash for exact deduplication (two independent 64-bit hashes: FNV-1a and a
// splitmix64 chain over 8-byte words), fed incrementally.
class ContentHasher {
 public:
  void update(std::string_view bytes);
  std::pair<uint64_t, uint64_t> finish();

 private:
  uint64_t fnv_ = 0xcbf29ce484222325ull;
  uint64_t words_ = 0x6465647570646f63ull;  // "dedupdoc"
  uint64_t length_ = 0;
  unsigned char tail_[8] = {};
  size_t tail_size_ = 0;
};
std::pair<uint64_t, uint64_t> content_hash(std::string_view text);

struct DocumentPiece {
  uint64_t document = 0;  // ordinal of its document in the input
  uint32_t file = 0;      // index into the file list
  int64_t line = 0;       // JSON Lines: 1-based line number; 0 for text
  int64_t block = -1;     // text blocks: the block's number; -1 otherwise
  bool first = true;
  bool last = true;
  bool json = false;  // text holds the raw JSON line until a worker extracts the field
  std::string text;
  bool hash_known = false;  // set by the reader for documents of several pieces
  std::pair<uint64_t, uint64_t> hash{0, 0};
};

struct ReaderOptions {
  size_t piece_bytes = 1 << 20;  // text documents: encoding piece
  size_t block_bytes = 0;        // > 0: text files cut into documents of about this size
  bool hash_documents = false;   // exact dedup on: hash multi-piece documents in a first pass
};

class DocumentReader {
 public:
  DocumentReader(std::vector<SourceFile> files, ReaderOptions options);

  // Appends pieces until about `chunk_bytes` of text were added or the input ends; false when
  // nothing was left to read.
  bool next_chunk(std::vector<DocumentPiece>& pieces, size_t chunk_bytes);

  // Bytes of the files read so far (compressed bytes for .gz / .zst): progress.
  uint64_t bytes_read() const;
  const std::vector<SourceFile>& files() const { return files_; }

  // The document's name as the split hashes it ("src/a.txt", "src/a.jsonl:12", "src/a.txt#3").
  std::string document_name(const DocumentPiece& piece) const;

 private:
  bool next_piece(DocumentPiece& piece);
  bool open_next_file();
  bool read_text_piece(DocumentPiece& piece);

  std::vector<SourceFile> files_;
  ReaderOptions options_;
  size_t next_file_ = 0;
  uint32_t current_ = 0;
  std::unique_ptr<BufferedReader> reader_;
  uint64_t done_file_bytes_ = 0;  // of the files already finished
  uint64_t documents_ = 0;
  // text files: the piece read ahead (to know whether the current one is the last)
  bool has_ahead_ = false;
  std::string ahead_;
  bool document_open_ = false;
  int64_t block_ = 0;
};

}  // namespace patchbay::data
