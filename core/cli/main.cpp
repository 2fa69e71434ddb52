// `patchbay`: the host's command-line entry point. Parses the global options (which come
// before the command), sets up logging, finds the command by its path words in the
// command table (command.hpp) and runs it. Every error ends here as one clean message and
// an exit code (see exit_codes_help): no stack traces.
#include <boost/program_options/errors.hpp>
#include <cstdlib>
#include <iostream>
#include <string>
#include <vector>

#include "cli/command.hpp"
#include "common/error.hpp"
#include "common/logging.hpp"
#include "config/closest_names.hpp"
#include "config/config_error.hpp"

#ifndef PATCHBAY_VERSION
#error "PATCHBAY_VERSION must be defined by the build"
#endif

namespace patchbay::cli {
namespace {

constexpr const char* kGlobalOptionsHelp =
    "Global options (before the command):\n"
    "  --log-level LEVEL   trace, debug, info, warn or error (default info); logs go to stderr\n"
    "  --plugin-path PATH  a plugin file (NAME.so) or a folder of them, searched before\n"
    "                      PATCHBAY_PLUGIN_PATH (colon-separated, same forms), the config's\n"
    "                      run.plugin_paths and the built-in folders (repeatable)\n"
    "  -h, --help          this help; `patchbay <command> --help` describes one command\n"
    "  --version           print the version\n";

struct ParsedCommandLine {
  GlobalOptions global;
  bool help = false;
  bool version = false;
  std::vector<std::string> words;  // the command path and its arguments
};

class UsageError : public Error {
 public:
  explicit UsageError(const std::string& message) : Error(ErrorKind::kInvalidArgument, message) {}
};

ParsedCommandLine parse_global_options(int argc, char** argv) {
  ParsedCommandLine parsed;
  int index = 1;
  // Reads the value of option `name`, given as "--name=value" or "--name value".
  auto option_value = [&](const std::string& arg, const std::string& name) -> std::string {
    if (arg.size() > name.size() && arg[name.size()] == '=') return arg.substr(name.size() + 1);
    if (index + 1 >= argc) throw UsageError("option " + name + " needs a value; see patchbay --help");
    return argv[++index];
  };
  for (; index < argc; ++index) {
    const std::string arg = argv[index];
    if (arg.empty() || arg[0] != '-') break;
    if (arg == "-h" || arg == "--help") {
      parsed.help = true;
    } else if (arg == "--version") {
      parsed.version = true;
    } else if (arg.rfind("--log-level", 0) == 0) {
      parsed.global.log_level = option_value(arg, "--log-level");
      logging::parse_log_level(parsed.global.log_level);  // rejects unknown levels early
    } else if (arg.rfind("--plugin-path", 0) == 0) {
      parsed.global.plugin_paths.push_back(option_value(arg, "--plugin-path"));
    } else {
      throw UsageError("unknown global option '" + arg +
                       "'; global options are --log-level, --plugin-path, --help, --version "
                       "(command options go after the command)");
    }
  }
  for (; index < argc; ++index) parsed.words.emplace_back(argv[index]);
  return parsed;
}

void print_help(std::ostream& out) {
  const CommandRegistry& registry = CommandRegistry::instance();
  out << "patchbay " << PATCHBAY_VERSION << ": a research platform for transformer language models\n\n"
      << "Usage: patchbay [global options] <command> [options]\n\n"
      << kGlobalOptionsHelp << "\nCommands:\n";
  size_t width = 0;
  for (const Command& command : registry.commands()) width = std::max(width, command.path.size());
  for (const std::string& group : registry.groups()) {
    out << "  " << group << "\n";
    for (const Command* command : registry.commands_in_group(group)) {
      out << "    " << command->path << std::string(width + 2 - command->path.size(), ' ') << command->summary
          << "\n";
    }
  }
  out << "\nExit codes:\n" << exit_codes_help();
}

void print_group_help(std::ostream& out, const std::string& group) {
  const CommandRegistry& registry = CommandRegistry::instance();
  out << "Commands under '" << group << "' (patchbay " << group << " <command> --help for details):\n";
  size_t width = 0;
  for (const Command* command : registry.commands_in_group(group)) width = std::max(width, command->path.size());
  for (const Command* command : registry.commands_in_group(group)) {
    out << "  " << command->path << std::string(width + 2 - command->path.size(), ' ') << command->summary << "\n";
  }
}

// Message for words that select no command: the closest command paths and groups.
std::string unknown_command_message(const std::vector<std::string>& words) {
  const CommandRegistry& registry = CommandRegistry::instance();
  std::vector<std::string> candidates = registry.groups();
  for (const Command& command : registry.commands()) candidates.push_back(command.path);
  std::string typed = words.front();
  std::vector<std::string> close;
  // A known group with an unknown second word: suggest within the group.
  if (words.size() >= 2 && !registry.commands_in_group(words[0]).empty()) {
    typed = words[0] + " " + words[1];
    std::vector<std::string> in_group;
    for (const Command* command : registry.commands_in_group(words[0])) in_group.push_back(command->path);
    close = config::closest_names(typed, in_group);
  } else {
    close = config::closest_names(typed, candidates);
    if (close.empty() && words.size() >= 2) close = config::closest_names(words[0] + " " + words[1], candidates);
  }
  std::string message = "unknown command '" + typed + "'";
  if (!close.empty()) message += "; did you mean " + config::quote_alternatives(close) + "?";
  return message + " Run 'patchbay --help' for the list of commands.";
}

int exit_code_for(ErrorKind kind) {
  switch (kind) {
    case ErrorKind::kInvalidArgument: return kExitUsage;
    case ErrorKind::kNotFound: return kExitData;
    case ErrorKind::kPluginRefused: return kExitPlugin;
    case ErrorKind::kComponentNotFound: return kExitPlugin;
    case ErrorKind::kIo: return kExitData;
    case ErrorKind::kNumeric: return kExitNumeric;
    case ErrorKind::kInternal: return kExitFailure;
  }
  return kExitFailure;
}

int run(int argc, char** argv) {
  const ParsedCommandLine parsed = parse_global_options(argc, argv);
  logging::init_logging(logging::parse_log_level(parsed.global.log_level));
  const CommandRegistry& registry = CommandRegistry::instance();
  for (const std::string& path : registry.duplicate_paths()) {
    throw Error(ErrorKind::kInternal, "command '" + path + "' is registered twice; rename one of them");
  }
  if (parsed.version) {
    std::cout << "patchbay " << PATCHBAY_VERSION << "\n";
    return kExitOk;
  }
  if (parsed.words.empty()) {
    print_help(parsed.help ? std::cout : std::cerr);
    return parsed.help ? kExitOk : kExitUsage;
  }
  size_t consumed = 0;
  const Command* command = registry.find(parsed.words, &consumed);
  if (command == nullptr) {
    const std::string& group = parsed.words.front();
    const bool wants_help = parsed.help || parsed.words.size() == 1 ||
                            parsed.words[1] == "--help" || parsed.words[1] == "-h";
    if (!registry.commands_in_group(group).empty() && wants_help) {
      const bool asked = parsed.help || parsed.words.size() > 1;
      print_group_help(asked ? std::cout : std::cerr, group);
      return asked ? kExitOk : kExitUsage;
    }
    throw UsageError(unknown_command_message(parsed.words));
  }
  std::vector<std::string> args(parsed.words.begin() + static_cast<std::ptrdiff_t>(consumed), parsed.words.end());
  if (parsed.help) args.insert(args.begin(), "--help");  // `patchbay --help config show`
  return command->run(args, parsed.global);
}

}  // namespace
}  // namespace patchbay::cli

int main(int argc, char** argv) {
  using namespace patchbay::cli;
  try {
    return run(argc, argv);
  } catch (const patchbay::config::ConfigError& e) {
    std::cerr << "error: " << e.what() << "\n";
    return kExitConfig;
  } catch (const patchbay::Error& e) {
    std::cerr << "error: " << e.what() << "\n";
    return exit_code_for(e.kind());
  } catch (const boost::program_options::error& e) {
    std::cerr << "error: " << e.what() << "; see the command's --help\n";
    return kExitUsage;
  } catch (const std::exception& e) {
    std::cerr << "error: internal: " << e.what() << "\n";
    return kExitFailure;
  }
}
