// metrics.jsonl: one JSON object per line, appended and flushed per record so a crashed run
// keeps every metric it reported. Resuming a run appends to the same file.
#pragma once

#include <cstdio>
#include <filesystem>
#include <nlohmann/json.hpp>

namespace patchbay::run {

class MetricsLog {
 public:
  // Opens `path` for appending (creating folders). Throws patchbay::Error (kIo) naming it.
  explicit MetricsLog(const std::filesystem::path& path);
  ~MetricsLog();
  MetricsLog(const MetricsLog&) = delete;
  MetricsLog& operator=(const MetricsLog&) = delete;

  // Appends `record` as one line and flushes it to the OS. Non-finite numbers are written as
  // null (JSON has no NaN), so a NaN loss is still recorded as a line.
  void append(const nlohmann::json& record);
  const std::filesystem::path& path() const { return path_; }

 private:
  std::filesystem::path path_;
  std::FILE* file_ = nullptr;
};

// Reads every record of a metrics.jsonl file (for reports, tests and resume checks).
std::vector<nlohmann::json> read_metrics(const std::filesystem::path& path);

}  // namespace patchbay::run
