// read_seq2seq_records (seq2seq_pairs.hpp): JSON Lines {"source"[, "target"]} or plain lines.
#include "eval/seq2seq_pairs.hpp"

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "common/error.hpp"

namespace patchbay::eval {
namespace {

bool blank(const std::string& line) {
  return line.find_first_not_of(" \t\r\n") == std::string::npos;
}

}  // namespace

std::vector<Seq2SeqRecord> read_seq2seq_records(const std::string& path, bool require_targets) {
  if (!std::filesystem::is_regular_file(path))
    throw Error(ErrorKind::kNotFound, path +
                                          ": no such file (expected JSON Lines of "
                                          "{\"source\", \"target\"} or one source per line)");
  std::ifstream in(path);
  std::vector<Seq2SeqRecord> records;
  std::optional<bool> json_lines;
  std::string line;
  for (int64_t number = 1; std::getline(in, line); ++number) {
    if (!line.empty() && line.back() == '\r') line.pop_back();
    if (blank(line)) continue;
    const std::string at = path + ":" + std::to_string(number);
    if (!json_lines)
      json_lines = line.find_first_not_of(" \t") != std::string::npos &&
                   line[line.find_first_not_of(" \t")] == '{';
    Seq2SeqRecord r;
    r.line = number;
    if (*json_lines) {
      const nlohmann::json j = nlohmann::json::parse(line, nullptr, false);
      if (!j.is_object() || !j.contains("source") || !j["source"].is_string())
        throw Error(ErrorKind::kInvalidArgument,
                    at + ": expected a JSON object with a string \"source\"" +
                        (require_targets ? " and a string \"target\"" : ""));
      r.source = j["source"].get<std::string>();
      if (j.contains("target")) {
        if (!j["target"].is_string())
          throw Error(ErrorKind::kInvalidArgument, at + ": \"target\" must be a string");
        r.target = j["target"].get<std::string>();
      }
    } else {
      r.source = line;
    }
    if (require_targets && !r.target)
      throw Error(ErrorKind::kInvalidArgument,
                  at + ": a test set needs a \"target\" on every line (JSON Lines "
                       "{\"source\": ..., \"target\": ...})");
    if (r.source.empty()) throw Error(ErrorKind::kInvalidArgument, at + ": the source is empty");
    records.push_back(std::move(r));
  }
  if (records.empty()) throw Error(ErrorKind::kInvalidArgument, path + " holds no sources");
  return records;
}

}  // namespace patchbay::eval
