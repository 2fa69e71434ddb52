// JSON Lines metrics writer and reader.
#include "run/metrics_log.hpp"

#include <cerrno>
#include <cstring>
#include <fstream>
#include <string>
#include <utility>

#include "common/error.hpp"
#include "run/atomic_file.hpp"

namespace patchbay::run {

MetricsLog::MetricsLog(const std::filesystem::path& path) : path_(path) {
  std::error_code ec;
  if (!path.parent_path().empty()) std::filesystem::create_directories(path.parent_path(), ec);
  file_ = std::fopen(path.c_str(), "a");
  if (!file_)
    throw Error(ErrorKind::kIo, "cannot open metrics file '" + path.string() + "' for appending (" +
                                    std::strerror(errno) + "); check the run directory is writable");
}

MetricsLog::~MetricsLog() {
  if (file_) std::fclose(file_);
}

void MetricsLog::append(const nlohmann::json& record) {
  // dump() with error_handler "replace" never throws on odd UTF-8 in strings; NaN/Inf
  // floats are serialised as null by nlohmann::json.
  const std::string line = record.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace) + "\n";
  if (std::fwrite(line.data(), 1, line.size(), file_) != line.size() || std::fflush(file_) != 0)
    throw Error(ErrorKind::kIo, "cannot append to '" + path_.string() + "' (" +
                                    std::strerror(errno) + "); free disk space and resume the run");
}

namespace {

// Calls visit(line, record) for every non-empty line in order. A torn last line (a crash
// mid-append) is skipped; an unparsable line before it is an error naming it.
template <typename Visit>
void for_each_record(const std::filesystem::path& path, Visit&& visit) {
  std::ifstream in(path);
  if (!in) throw Error(ErrorKind::kNotFound, "cannot read metrics file '" + path.string() + "'");
  std::string line;
  std::size_t number = 0;
  while (std::getline(in, line)) {
    ++number;
    if (line.empty()) continue;
    nlohmann::json record;
    try {
      record = nlohmann::json::parse(line);
    } catch (const nlohmann::json::exception&) {
      // A crash can leave a torn last line; earlier lines are intact and still returned.
      if (in.peek() == EOF) break;
      throw Error(ErrorKind::kInvalidArgument,
                  path.string() + ":" + std::to_string(number) + ": not a JSON object");
    }
    visit(line, record);
  }
}

}  // namespace

std::vector<nlohmann::json> read_metrics(const std::filesystem::path& path) {
  std::vector<nlohmann::json> records;
  for_each_record(path, [&](const std::string&, nlohmann::json& record) { records.push_back(std::move(record)); });
  return records;
}

std::size_t drop_metrics_after(const std::filesystem::path& path, int64_t last_step) {
  if (!std::filesystem::exists(path)) return 0;
  std::string kept;
  std::size_t kept_lines = 0;
  std::size_t all_lines = 0;
  {
    std::ifstream in(path);
    std::string line;
    while (std::getline(in, line)) all_lines += line.empty() ? 0 : 1;
  }
  for_each_record(path, [&](const std::string& line, const nlohmann::json& record) {
    const auto step = record.is_object() ? record.find("step") : record.end();
    if (record.is_object() && step != record.end() && step->is_number_integer() &&
        step->get<int64_t>() > last_step)
      return;
    kept += line;
    kept += '\n';
    ++kept_lines;
  });
  if (kept_lines == all_lines) return 0;  // nothing to drop: leave the file untouched
  write_text_atomically(path, kept);
  return all_lines - kept_lines;
}

}  // namespace patchbay::run
