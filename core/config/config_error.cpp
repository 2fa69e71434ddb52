// Formatting of config issues; see config_error.hpp.
#include "config/config_error.hpp"

#include <utility>

namespace patchbay::config {

std::string SourceLocation::to_string() const {
  if (line <= 0) return file;
  return file + ":" + std::to_string(line);
}

std::string ConfigIssue::to_string() const {
  std::string text = where.to_string() + ": ";
  if (!key_path.empty()) text += key_path + ": ";
  text += problem;
  if (!expected.empty()) text += "\n    expected: " + expected;
  if (!found.empty()) text += "\n    found:    " + found;
  if (!fix.empty()) text += "\n    fix:      " + fix;
  return text;
}

std::string format_issues(const std::vector<ConfigIssue>& issues) {
  if (issues.size() == 1) return issues.front().to_string();
  std::string text = std::to_string(issues.size()) + " errors in the config:";
  for (const ConfigIssue& issue : issues) text += "\n  " + issue.to_string();
  return text;
}

ConfigError::ConfigError(std::vector<ConfigIssue> issues)
    : Error(ErrorKind::kInvalidArgument, format_issues(issues)), issues_(std::move(issues)) {}

}  // namespace patchbay::config
