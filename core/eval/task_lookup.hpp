// Finding a task from what a user wrote: a YAML file, or a shipped task's name looked up as
// configs/tasks/<name>.yaml under the working directory, then under the source tree the running
// executable was built from (build/ beside configs/). `patchbay eval --tasks` and `[eval] tasks`
// in a training config both resolve names here. A config entry may end in ":N", the number of
// documents evaluated for that task ("kjv_cloze:50"), unless the whole entry names a file.
#pragma once

#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>

namespace patchbay::eval {

// Throws Error(kNotFound) listing where it looked.
std::filesystem::path resolve_task(const std::string& name);

struct TaskEntry {
  std::string task;              // name or file, without the ":N" suffix
  std::optional<int64_t> limit;  // from ":N"
};
// Splits "name:N" (N: decimal digits, at least 1); an entry that is an existing file, or has no
// such suffix, is taken whole. Throws Error(kInvalidArgument) for ":0" or an empty name.
TaskEntry parse_task_entry(const std::string& entry);

}  // namespace patchbay::eval
