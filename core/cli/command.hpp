// The `patchbay` CLI's command table. Each subcommand lives in its own commands_*.cpp and
// registers itself with PATCHBAY_REGISTER_COMMAND; main.cpp parses the global options,
// finds the longest registered path matching the first words ("plugins list", "bench ops")
// and hands the remaining words to the command, which parses them with
// Boost.Program_options and answers --help itself.
#pragma once

#include <cstddef>
#include <functional>
#include <string>
#include <string_view>
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
  // Returns true so it can initialise a static. A path registered twice is kept once and
  // reported by main (duplicate_paths) rather than aborting static initialisation.
  bool add(Command command);
  // Sorted by path.
  const std::vector<Command>& commands() const { return commands_; }

  // The command whose path is the longest prefix of `words` (whole words), or nullptr.
  // `*consumed` gets the number of words its path has.
  const Command* find(const std::vector<std::string>& words, size_t* consumed) const;
  // First words of every command path, sorted, unique ("config", "plugins", ...).
  std::vector<std::string> groups() const;
  // Commands whose path starts with the word `group`.
  std::vector<const Command*> commands_in_group(std::string_view group) const;
  // Paths that were registered more than once (a build mistake).
  const std::vector<std::string>& duplicate_paths() const { return duplicate_paths_; }

 private:
  std::vector<Command> commands_;
  std::vector<std::string> duplicate_paths_;
};

// The exit-code table printed by `patchbay --help`, one line per code.
const char* exit_codes_help();

}  // namespace patchbay::cli

#define PATCHBAY_CLI_CONCAT2(a, b) a##b
#define PATCHBAY_CLI_CONCAT(a, b) PATCHBAY_CLI_CONCAT2(a, b)
// Usage at namespace scope in a commands_*.cpp:
//   PATCHBAY_REGISTER_COMMAND({"plugins list", "List plugins on the search path", run_list});
#define PATCHBAY_REGISTER_COMMAND(...)                                              \
  [[maybe_unused]] static const bool PATCHBAY_CLI_CONCAT(patchbay_command_, __LINE__) = \
      ::patchbay::cli::CommandRegistry::instance().add(::patchbay::cli::Command __VA_ARGS__)
