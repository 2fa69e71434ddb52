// A run directory belongs to one training process at a time, and a resumed run writes only
// into the directory it was resumed from (wherever the run has been moved or copied to):
//   run_dir_of_resume_path   the run directory a `--resume` argument names
//   RunDirectoryLock         an exclusive flock(2) on <run_dir>/.patchbay.lock, holding the
//                            owner's pid and command; the kernel drops it when the process dies
//                            (also by SIGKILL), so a stale lock file never blocks a new run
//   remove_stale_temporaries "<file>.tmp-<pid>" files (run/atomic_file.hpp) that a killed write
//                            left behind; removed only when process <pid> is gone
#pragma once

#include <filesystem>
#include <string>
#include <vector>

namespace patchbay::run {

// The run directory of a --resume argument: a run directory itself, its checkpoints/ folder,
// or a checkpoint file inside checkpoints/ (a file elsewhere: the folder holding it).
std::filesystem::path run_dir_of_resume_path(const std::filesystem::path& resume);

class RunDirectoryLock {
 public:
  // Creates `run_dir` if needed and takes the lock, or throws Error(kIo) naming the process
  // that holds it ("pid 1234: patchbay train ...") and what to do.
  explicit RunDirectoryLock(const std::filesystem::path& run_dir);
  ~RunDirectoryLock();
  RunDirectoryLock(const RunDirectoryLock&) = delete;
  RunDirectoryLock& operator=(const RunDirectoryLock&) = delete;

  static constexpr const char* kFileName = ".patchbay.lock";

 private:
  int fd_ = -1;
};

// Removes every "*.tmp-<pid>" in `folder` (not recursive) whose process no longer runs and is
// not this one; returns the paths removed. A missing folder removes nothing.
std::vector<std::filesystem::path> remove_stale_temporaries(const std::filesystem::path& folder);

}  // namespace patchbay::run
