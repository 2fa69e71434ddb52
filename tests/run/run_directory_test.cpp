// Run-directory ownership (run/run_directory.hpp): which directory a --resume path names, the
// lock that refuses a second writer naming the first, a stale lock that does not block, and
// stale temporaries removed only when their writer is gone.
#include "run/run_directory.hpp"

#include <doctest/doctest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <fstream>

#include "common/error.hpp"
#include "patchbay/testing/temp_dir.hpp"

namespace fs = std::filesystem;
using namespace patchbay::run;

namespace {
// The pid of a process that has exited (and been reaped), so it no longer runs.
pid_t dead_pid() {
  const pid_t child = ::fork();
  if (child == 0) ::_exit(0);
  ::waitpid(child, nullptr, 0);
  return child;
}
}  // namespace

TEST_CASE(
    "the run directory of a --resume path: the run, its checkpoints folder or a checkpoint in it") {
  const patchbay::testing::TempDir scratch("run_directory");
  const fs::path run = scratch / "moved" / "run";
  fs::create_directories(run / "checkpoints");
  std::ofstream(run / "checkpoints" / "step_3.safetensors") << "x";
  CHECK(run_dir_of_resume_path(run) == run);
  CHECK(run_dir_of_resume_path(run.string() + "/") == run);
  CHECK(run_dir_of_resume_path(run / "checkpoints") == run);
  CHECK(run_dir_of_resume_path(run / "checkpoints" / "step_3.safetensors") == run);
  CHECK(run_dir_of_resume_path(scratch / "moved" / "loose.safetensors") == scratch / "moved");
}

TEST_CASE("a second writer of a run directory is refused naming the first; the lock ends with it") {
  const patchbay::testing::TempDir scratch("run_directory");
  const fs::path run = scratch / "run";
  {
    RunDirectoryLock first(run);
    try {
      RunDirectoryLock second(run);
      FAIL("a second lock on one run directory was granted");
    } catch (const patchbay::Error& e) {
      CHECK(e.kind() == patchbay::ErrorKind::kIo);
      CHECK(std::string(e.what()).find("pid " + std::to_string(::getpid())) != std::string::npos);
      CHECK(std::string(e.what()).find("in use by another process") != std::string::npos);
    }
  }
  RunDirectoryLock again(run);  // released with the first
}

TEST_CASE("a lock file left by a killed process does not block") {
  const patchbay::testing::TempDir scratch("run_directory");
  const fs::path run = scratch / "run";
  fs::create_directories(run);
  std::ofstream(run / RunDirectoryLock::kFileName)
      << "pid " << dead_pid() << ": patchbay train x.toml\n";
  CHECK_NOTHROW(RunDirectoryLock{run});
}

TEST_CASE("temporaries of dead writers are removed, a running writer's are kept") {
  const patchbay::testing::TempDir scratch("run_directory");
  const pid_t gone = dead_pid();
  const fs::path stale = scratch / ("step_9.safetensors.tmp-" + std::to_string(gone));
  const fs::path live = scratch / ("latest.tmp-" + std::to_string(::getppid()));
  const fs::path other = scratch / "notes.tmp-abc";
  for (const fs::path& p : {stale, live, other}) std::ofstream(p) << "x";
  const std::vector<fs::path> removed = remove_stale_temporaries(scratch);
  REQUIRE(removed.size() == 1);
  CHECK(removed[0] == stale);
  CHECK_FALSE(fs::exists(stale));
  CHECK(fs::exists(live));
  CHECK(fs::exists(other));
  CHECK(remove_stale_temporaries(scratch / "absent").empty());
}
