// Task names and files (task_lookup.hpp).
#include "eval/task_lookup.hpp"

#include <system_error>
#include <vector>

#include "common/error.hpp"

namespace patchbay::eval {

namespace fs = std::filesystem;

fs::path resolve_task(const std::string& name) {
  if (fs::exists(name)) return name;
  std::vector<fs::path> tried = {fs::path("configs/tasks") / (name + ".yaml")};
  std::error_code ec;
  const fs::path exe = fs::read_symlink("/proc/self/exe", ec);
  if (!ec) tried.push_back(exe.parent_path().parent_path() / "configs/tasks" / (name + ".yaml"));
  for (const fs::path& p : tried)
    if (fs::exists(p)) return p;
  std::string list;
  for (const fs::path& p : tried) list += (list.empty() ? "" : ", ") + p.string();
  throw Error(ErrorKind::kNotFound, "task '" + name +
                                        "' is neither a file nor a shipped task (looked for " +
                                        list + "); shipped tasks are listed in docs/evaluation.md");
}

TaskEntry parse_task_entry(const std::string& entry) {
  const size_t colon = entry.rfind(':');
  std::error_code ec;
  if (colon == std::string::npos || colon + 1 == entry.size() || fs::exists(entry, ec) ||
      entry.find_first_not_of("0123456789", colon + 1) != std::string::npos)
    return {entry, std::nullopt};
  const std::string task = entry.substr(0, colon);
  const std::string digits = entry.substr(colon + 1);
  if (task.empty())
    throw Error(ErrorKind::kInvalidArgument,
                "task entry '" + entry + "' has a limit but no task name before the ':'");
  if (digits.size() > 15 || std::stoll(digits) < 1)
    throw Error(ErrorKind::kInvalidArgument,
                "task entry '" + entry +
                    "': the number after ':' is the documents to evaluate, from 1 to "
                    "999999999999999; leave it out to evaluate every document");
  return {task, std::stoll(digits)};
}

}  // namespace patchbay::eval
