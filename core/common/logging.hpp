// Logging set-up for the host (spdlog). One process-wide logger, installed as spdlog's
// default so every core file simply calls spdlog::info(...). It writes to stderr (stdout
// stays free for command results such as `config show`), and a run can later add a file
// sink for its run directory: both sinks then receive every message at or above the
// console level.
//
// Thread safety: init_logging and add_run_log_file are meant to be called from the main
// thread before work starts; logging itself is thread safe (the sinks are *_mt).
#pragma once

#include <filesystem>
#include <string_view>

#include <spdlog/common.h>

namespace patchbay::logging {

// "trace", "debug", "info", "warn", "error" (also "off"). Throws patchbay::Error
// (kInvalidArgument) naming the valid levels for anything else.
spdlog::level::level_enum parse_log_level(std::string_view name);

// Installs the default logger: stderr console sink, pattern "[HH:MM:SS.mmm] [level] msg".
// Calling it again replaces the level and keeps the sinks.
void init_logging(spdlog::level::level_enum level);

// Adds a sink appending to `log_file` (created with its parent folders), for a run
// directory's log. Throws patchbay::Error (kIo) when the file cannot be opened.
void add_run_log_file(const std::filesystem::path& log_file);

}  // namespace patchbay::logging
