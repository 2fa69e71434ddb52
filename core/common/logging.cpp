// The host's logger: a distributing sink (so file sinks can be added after start-up)
// feeding a stderr console sink and, per run, a file sink.
#include "common/logging.hpp"

#include <array>
#include <memory>
#include <string>

#include <spdlog/sinks/basic_file_sink.h>
#include <spdlog/sinks/dist_sink.h>
#include <spdlog/sinks/stdout_color_sinks.h>
#include <spdlog/spdlog.h>

#include "common/error.hpp"

namespace patchbay::logging {
namespace {

constexpr const char* kPattern = "[%H:%M:%S.%e] [%^%l%$] %v";

// The distributing sink behind the default logger; created on first init.
std::shared_ptr<spdlog::sinks::dist_sink_mt>& distributing_sink() {
  static std::shared_ptr<spdlog::sinks::dist_sink_mt> sink;
  return sink;
}

}  // namespace

spdlog::level::level_enum parse_log_level(std::string_view name) {
  static constexpr std::array<std::pair<std::string_view, spdlog::level::level_enum>, 6> kLevels{{
      {"trace", spdlog::level::trace},
      {"debug", spdlog::level::debug},
      {"info", spdlog::level::info},
      {"warn", spdlog::level::warn},
      {"error", spdlog::level::err},
      {"off", spdlog::level::off},
  }};
  for (const auto& [level_name, level] : kLevels) {
    if (name == level_name) return level;
  }
  throw Error(ErrorKind::kInvalidArgument,
              "unknown log level '" + std::string(name) +
                  "': expected one of trace, debug, info, warn, error, off");
}

void init_logging(spdlog::level::level_enum level) {
  auto& dist = distributing_sink();
  if (!dist) {
    dist = std::make_shared<spdlog::sinks::dist_sink_mt>();
    auto console = std::make_shared<spdlog::sinks::stderr_color_sink_mt>();
    console->set_pattern(kPattern);
    dist->add_sink(console);
    auto logger = std::make_shared<spdlog::logger>("patchbay", dist);
    spdlog::set_default_logger(logger);
  }
  spdlog::set_level(level);
}

void add_run_log_file(const std::filesystem::path& log_file) {
  if (!distributing_sink()) init_logging(spdlog::level::info);
  std::error_code ignored;
  if (log_file.has_parent_path()) std::filesystem::create_directories(log_file.parent_path(), ignored);
  try {
    auto file_sink = std::make_shared<spdlog::sinks::basic_file_sink_mt>(log_file.string());
    file_sink->set_pattern(kPattern);
    distributing_sink()->add_sink(file_sink);
  } catch (const spdlog::spdlog_ex& e) {
    throw Error(ErrorKind::kIo, "cannot open log file '" + log_file.string() + "': " + e.what() +
                                    "; check that the run directory is writable");
  }
}

}  // namespace patchbay::logging
