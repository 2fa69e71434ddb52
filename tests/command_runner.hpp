// Runs a shell command (or the patchbay CLI built with the tests) and captures what it prints,
// for the tests that check the CLI as a user meets it. Header-only; a test target that calls
// run_patchbay() defines PATCHBAY_EXECUTABLE and PATCHBAY_TEST_PLUGIN_DIR.
#pragma once

#include <doctest/doctest.h>
#include <sys/wait.h>

#include <array>
#include <cstdio>
#include <string>

namespace patchbay::testing {

struct CommandResult {
  int exit_code = -1;  // the command's exit status; -1 when a signal ended it
  std::string output;  // what it wrote to stdout (and stderr where the command has 2>&1)
};

inline CommandResult run_shell(const std::string& command) {
  CommandResult result;
  FILE* pipe = popen(command.c_str(), "r");
  REQUIRE(pipe != nullptr);
  std::array<char, 4096> buffer{};
  size_t read = 0;
  while ((read = fread(buffer.data(), 1, buffer.size(), pipe)) > 0)
    result.output.append(buffer.data(), read);
  const int status = pclose(pipe);
  result.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  return result;
}

#if defined(PATCHBAY_EXECUTABLE) && defined(PATCHBAY_TEST_PLUGIN_DIR)
// `patchbay ARGUMENTS` with stdout and stderr together. The plugin folder is passed explicitly
// and PATCHBAY_PLUGIN_PATH from ctest is cleared, so a test behaves the same when run by hand;
// `environment` ("NAME=value ...") is set for the command.
inline CommandResult run_patchbay(const std::string& arguments,
                                  const std::string& environment = "") {
  return run_shell(std::string("env -u PATCHBAY_PLUGIN_PATH ") + environment + " '" +
                   PATCHBAY_EXECUTABLE + "' --plugin-path '" + PATCHBAY_TEST_PLUGIN_DIR + "' " +
                   arguments + " 2>&1");
}
#endif

}  // namespace patchbay::testing
