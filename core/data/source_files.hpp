// The files of `patchbay data prepare`'s sources, in a fixed order.
//
// A source is a file or a folder. A folder is walked recursively; hidden entries (a name
// starting with '.') are skipped, and the remaining files are kept when they match one of the
// include globs (none given: every file) and none of the exclude globs. A glob is matched
// (fnmatch, '*' also crossing '/') against the path relative to the folder and against the
// file name alone, so "*.md" and "docs/*.txt" both work. Files come in sorted relative-path
// order, sources in the order given: the document order (and so the shards) never depends on
// the file system's listing order.
// Format by name (after a ".gz" / ".zst" compression suffix is removed): ".jsonl" / ".ndjson"
// are JSON Lines (one document per line, its text in a named string field); everything else
// is text. Uncompressed text files whose first 8 KiB hold a NUL byte are binary and skipped
// in folders (a file named directly is always read).
#pragma once

#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

namespace patchbay::data {

struct SourceSpec {
  std::filesystem::path path;
  std::vector<std::string> include;  // globs; empty: every file
  std::vector<std::string> exclude;  // globs
  std::string jsonl_field = "text";  // JSON Lines: the field holding the document's text
};

enum class SourceFormat { kText, kJsonLines };

struct SourceFile {
  std::filesystem::path path;  // as opened
  // Stable name for documents: the source's own name, then the path inside the folder
  // ("docs/guide/intro.md"); the split hashes document names built from it.
  std::string name;
  SourceFormat format = SourceFormat::kText;
  size_t source = 0;   // index into the sources given
  uint64_t bytes = 0;  // size on disk (compressed size for .gz / .zst)
};

// Every file of the sources, as described above. Throws Error(kNotFound) naming a source
// that does not exist, and Error(kInvalidArgument) when a source yields no file at all (with
// its globs, so a typo in a glob is caught).
std::vector<SourceFile> list_source_files(const std::vector<SourceSpec>& sources);

// fnmatch of `glob` against the relative path or the file name (exposed for tests).
bool glob_matches(const std::string& glob, const std::string& relative_path);

SourceFormat format_of(const std::filesystem::path& file);

}  // namespace patchbay::data
