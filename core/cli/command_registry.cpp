// The command table behind `patchbay`: registration during static initialisation and
// longest-prefix lookup of command paths; see command.hpp.
#include <algorithm>
#include <sstream>

#include "cli/command.hpp"

namespace patchbay::cli {
namespace {

std::vector<std::string> split_words(std::string_view path) {
  std::vector<std::string> words;
  std::istringstream stream{std::string(path)};
  for (std::string word; stream >> word;) words.push_back(word);
  return words;
}

}  // namespace

CommandRegistry& CommandRegistry::instance() {
  static CommandRegistry registry;
  return registry;
}

bool CommandRegistry::add(Command command) {
  const auto position = std::lower_bound(commands_.begin(), commands_.end(), command.path,
                                         [](const Command& c, const std::string& path) { return c.path < path; });
  if (position != commands_.end() && position->path == command.path) {
    duplicate_paths_.push_back(command.path);
    return true;
  }
  commands_.insert(position, std::move(command));
  return true;
}

const Command* CommandRegistry::find(const std::vector<std::string>& words, size_t* consumed) const {
  const Command* best = nullptr;
  size_t best_length = 0;
  for (const Command& command : commands_) {
    const std::vector<std::string> path = split_words(command.path);
    if (path.size() > words.size() || path.size() <= best_length) continue;
    if (std::equal(path.begin(), path.end(), words.begin())) {
      best = &command;
      best_length = path.size();
    }
  }
  if (consumed != nullptr) *consumed = best_length;
  return best;
}

std::vector<std::string> CommandRegistry::groups() const {
  std::vector<std::string> names;
  for (const Command& command : commands_) {
    const std::vector<std::string> path = split_words(command.path);
    if (!path.empty()) names.push_back(path.front());
  }
  std::sort(names.begin(), names.end());
  names.erase(std::unique(names.begin(), names.end()), names.end());
  return names;
}

std::vector<const Command*> CommandRegistry::commands_in_group(std::string_view group) const {
  std::vector<const Command*> found;
  for (const Command& command : commands_) {
    const std::vector<std::string> path = split_words(command.path);
    if (!path.empty() && path.front() == group) found.push_back(&command);
  }
  return found;
}

const char* exit_codes_help() {
  return "  0  success\n"
         "  1  the work itself failed (I/O, internal error)\n"
         "  2  bad command line (unknown command or option, bad value)\n"
         "  3  the config is invalid (every problem is listed)\n"
         "  4  a plugin or component could not be found or loaded\n"
         "  5  missing or unreadable data or files\n"
         "  6  NaN/Inf or a diverging loss stopped the work\n";
}

}  // namespace patchbay::cli
