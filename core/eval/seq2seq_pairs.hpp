// Files of sources for an encoder-decoder (generate --source-file, eval --test):
//   JSON Lines: each non-empty line an object with a string "source" (and, for a test set, a
//               string "target"; other keys ignored) — chosen when the first non-empty line
//               starts with '{';
//   plain text: one source per line (no targets).
// Blank lines are skipped in both. Every refusal names file:line and what was expected.
#pragma once

#include <optional>
#include <string>
#include <vector>

namespace patchbay::eval {

struct Seq2SeqRecord {
  std::string source;
  std::optional<std::string> target;
  int64_t line = 0;  // 1-based line in the file
};

// require_targets: every record must have a "target" (a test set; plain text is refused).
// Throws Error(kNotFound) for a missing file, Error(kInvalidArgument) for a bad line, an empty
// source, or a file with no records.
std::vector<Seq2SeqRecord> read_seq2seq_records(const std::string& path, bool require_targets);

}  // namespace patchbay::eval
