// Corpora: the text a model trains on, as named documents in a fixed order.
//
// Two sources:
//  - "kjv": the King James Bible printed by Debian's bible-kjv package, read by running
//    `bible -l100000 Gen1:1-Rev22:21` (one verse per line: the line width is set beyond the
//    longest verse, 532 characters). One document per chapter (1,189), named by its
//    heading ("Genesis 1"); a document's text is the heading line, a blank line and the
//    verse lines ("  1 In the beginning ..."), as `bible` prints them.
//  - a path: a text file, or a folder read recursively in sorted path order (hidden entries
//    skipped; a file counts as text when its first 8 KiB hold no NUL byte). Each file is cut
//    into blocks of at least kBlockBytes ending at a newline; block i of file F is named
//    "F#i" (F relative to the folder).
// Errors: patchbay::Error(kNotFound) for a missing `bible` program (with the install
// command) or path; kIo when reading fails.
#pragma once

#include <cstddef>
#include <string>
#include <vector>

namespace patchbay::data {

struct Document {
  std::string name;  // stable across runs: the split hashes it
  std::string text;  // ends with '\n' unless the source did not
};

struct Corpus {
  std::string source;         // "kjv" or the path given
  std::string description;    // how it was read, for the manifest
  std::string document_rule;  // "chapter" or "block of >= 16384 bytes ending at a newline"
  // Written between consecutive documents of a split: "\n" for the KJV (a blank line
  // between chapters, as `bible` prints them), "" for file blocks (they are contiguous).
  std::string separator;
  std::vector<Document> documents;
  size_t bytes() const;
};

inline constexpr size_t kBlockBytes = 16384;
inline constexpr const char* kKjvCommand = "bible -l100000 Gen1:1-Rev22:21";

// "kjv" (case-insensitive) or a path.
Corpus load_corpus(const std::string& source);
Corpus load_kjv_corpus();
Corpus load_text_corpus(const std::string& path);

// The KJV text as `bible` prints it, split into chapter documents (exposed for tests).
std::vector<Document> split_kjv_chapters(const std::string& printed);
// One file's text cut into blocks (exposed for tests).
std::vector<Document> split_into_blocks(const std::string& name, const std::string& text,
                                        size_t block_bytes = kBlockBytes);

}  // namespace patchbay::data
