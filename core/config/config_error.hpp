// Errors found in a user's config: where (file:line), which key, what was expected, what
// was found and what to do. Loading and validation collect ConfigIssue values; they reach
// the caller as one ConfigError carrying all of them, so a user fixes every mistake in one
// pass. ConfigError is a patchbay::Error (kInvalidArgument); the CLI maps it to exit code
// kExitConfig.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "common/error.hpp"

namespace patchbay::config {

// Where a key (or table) was written. `line` is 1-based; 0 when there is no line (a value
// from the command line, a schema default, or a table that exists nowhere yet).
struct SourceLocation {
  std::string file;
  int64_t line = 0;

  std::string to_string() const;  // "configs/x.toml:12", or just `file` when line == 0
  bool operator==(const SourceLocation&) const = default;
};

// Source names of values that do not come from a file.
inline constexpr const char* kCommandLineSource = "<command line --set>";
inline constexpr const char* kDefaultSource = "<schema default>";

struct ConfigIssue {
  SourceLocation where;
  std::string key_path;  // "tokenizer.vocab_size"; empty when the issue is about a file
  std::string problem;   // "unknown key", "wrong type", ...
  std::string expected;  // may be empty
  std::string found;     // may be empty
  std::string fix;       // what to do; may be empty

  // "where: key_path: problem" then indented "expected:", "found:", "fix:" lines.
  std::string to_string() const;
};

class ConfigError : public Error {
 public:
  explicit ConfigError(std::vector<ConfigIssue> issues);
  const std::vector<ConfigIssue>& issues() const { return issues_; }

 private:
  std::vector<ConfigIssue> issues_;
};

// Joins the issues into one message: the single issue, or "N errors in the config:" and
// every issue.
std::string format_issues(const std::vector<ConfigIssue>& issues);

}  // namespace patchbay::config
