// JSON Lines metrics writer and reader.
#include "run/metrics_log.hpp"

#include <cerrno>
#include <cstring>
#include <fstream>
#include <string>

#include "common/error.hpp"

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

std::vector<nlohmann::json> read_metrics(const std::filesystem::path& path) {
  std::ifstream in(path);
  if (!in) throw Error(ErrorKind::kNotFound, "cannot read metrics file '" + path.string() + "'");
  std::vector<nlohmann::json> records;
  std::string line;
  std::size_t number = 0;
  while (std::getline(in, line)) {
    ++number;
    if (line.empty()) continue;
    try {
      records.push_back(nlohmann::json::parse(line));
    } catch (const nlohmann::json::exception&) {
      // A crash can leave a torn last line; earlier lines are intact and still returned.
      if (in.peek() == EOF) break;
      throw Error(ErrorKind::kInvalidArgument,
                  path.string() + ":" + std::to_string(number) + ": not a JSON object");
    }
  }
  return records;
}

}  // namespace patchbay::run
