// The `patchbay` CLI's command table. Each subcommand lives in its own commands_*.cpp and
// registers itself with PATCHBAY_REGISTER_COMMAND; main.cpp parses the global options,
// finds the longest registered path matching the first words ("plugins list", "bench ops")
// and hands the remaining words to the command, which parses them with
// Boost.Program_options and answers --help itself.
#pragma once

#include <functional>
#include <string>
#include <vector>

namespace patchbay::cli {

// Exit codes, documented in `patchbay --help`.
enum ExitCode : int {
  kExitOk = 0,
  kExitFailure = 1,   // the work itself failed (I/O, numeric, internal)
  kExitUsage = 2,     // bad command line
  kExitConfig = 3,    // the config file is invalid
  kExitPlugin = 4,    // a plugin or component could not be found or loaded
  kExitData = 5,      // missing or unreadable data / files
  kExitNumeric = 6    // NaN/Inf or diverging loss stopped the work
};

// Options every command sees, parsed before the command name.
struct GlobalOptions {
  std::string log_level = "info";          // --log-level: trace|debug|info|warn|error
  std::vector<std::string> plugin_paths;   // --plugin-path (repeatable), searched first
};

struct Command {
  std::string path;     // words that select the command: "tokenizer train"
  std::string summary;  // one line for `patchbay --help`
  // Runs with the words after the path. Returns an ExitCode.
  std::function<int(const std::vector<std::string>& args, const GlobalOptions& global)> run;
};

// Process-wide table, filled during static initialisation of the executable.
class CommandRegistry {
 public:
  static CommandRegistry& instance();
  bool add(Command command);  // returns true so it can initialise a static
  const std::vector<Command>& commands() const { return commands_; }

 private:
  std::vector<Command> commands_;
};

}  // namespace patchbay::cli

#define PATCHBAY_CLI_CONCAT2(a, b) a##b
#define PATCHBAY_CLI_CONCAT(a, b) PATCHBAY_CLI_CONCAT2(a, b)
// Usage at namespace scope in a commands_*.cpp:
//   PATCHBAY_REGISTER_COMMAND({"plugins list", "List plugins on the search path", run_list});
#define PATCHBAY_REGISTER_COMMAND(...)                                              \
  [[maybe_unused]] static const bool PATCHBAY_CLI_CONCAT(patchbay_command_, __LINE__) = \
      ::patchbay::cli::CommandRegistry::instance().add(::patchbay::cli::Command __VA_ARGS__)
