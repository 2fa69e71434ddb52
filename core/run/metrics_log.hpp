// metrics.jsonl: one JSON object per line, appended and flushed per record so a crashed run
// keeps every metric it reported. Resuming a run first drops the records the interrupted run
// wrote after its checkpoint (drop_metrics_after), then appends to the same file, so each step
// has one training record and at most one evaluation record.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <vector>

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

// Keeps the records whose "step" is at most `last_step` (and any record without a step),
// byte for byte, and drops the others and a torn last line; the file is rewritten atomically
// (run/atomic_file.hpp), so a crash during the rewrite leaves the old file. Returns the number
// of lines dropped (0 also when the file does not exist, which is left absent). Throws
// patchbay::Error (kInvalidArgument) naming the line when a line other than the last is not
// JSON, (kIo) when the file cannot be read or written.
std::size_t drop_metrics_after(const std::filesystem::path& path, int64_t last_step);

}  // namespace patchbay::run
