// The host's logging set-up: level names, and a run log file receiving the messages the
// console gets.
#include <doctest/doctest.h>
#include <spdlog/spdlog.h>

#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

#include "common/error.hpp"
#include "common/logging.hpp"
#include "patchbay/testing/temp_dir.hpp"

using namespace patchbay::logging;

TEST_CASE("log level names") {
  CHECK(parse_log_level("trace") == spdlog::level::trace);
  CHECK(parse_log_level("warn") == spdlog::level::warn);
  CHECK(parse_log_level("error") == spdlog::level::err);
  try {
    parse_log_level("verbose");
    FAIL("expected an error");
  } catch (const patchbay::Error& e) {
    CHECK(e.kind() == patchbay::ErrorKind::kInvalidArgument);
    CHECK(std::string(e.what()).find("trace, debug, info, warn, error") != std::string::npos);
  }
}

TEST_CASE("a run log file gets every message at or above the level") {
  const patchbay::testing::TempDir scratch("logging_test");
  const std::filesystem::path& folder = scratch.path();
  init_logging(spdlog::level::info);
  add_run_log_file(folder / "run" / "log.txt");  // parent folders are created
  spdlog::debug("hidden below the level");
  spdlog::info("step {} done", 7);
  spdlog::default_logger()->flush();
  std::ifstream file(folder / "run" / "log.txt");
  std::stringstream text;
  text << file.rdbuf();
  CHECK(text.str().find("step 7 done") != std::string::npos);
  CHECK(text.str().find("[info]") != std::string::npos);
  CHECK(text.str().find("hidden") == std::string::npos);
}
