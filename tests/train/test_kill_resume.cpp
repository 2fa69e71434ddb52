// A run killed with SIGKILL and resumed with --resume, as a user would do it: the real
// `patchbay train` process is stopped while it is past a checkpoint (so metrics.jsonl holds
// records the checkpoint does not cover), killed, and resumed. The finished metrics.jsonl must
// hold each training step once, in order, with elapsed_seconds never going back, and each
// evaluation step once.
#include <doctest/doctest.h>
#include <fcntl.h>
#include <signal.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "run/metrics_log.hpp"
#include "train_fixture.hpp"

namespace fs = std::filesystem;

namespace {

// Starts `patchbay ARGS...` with stdout and stderr going to `log`; returns its pid.
pid_t start_patchbay(const std::vector<std::string>& args, const fs::path& log) {
  std::vector<std::string> argv = {PATCHBAY_EXECUTABLE, "--plugin-path", PATCHBAY_TEST_PLUGIN_DIR};
  argv.insert(argv.end(), args.begin(), args.end());
  const pid_t pid = ::fork();
  REQUIRE(pid >= 0);
  if (pid == 0) {
    const int fd = ::open(log.c_str(), O_WRONLY | O_CREAT | O_APPEND, 0644);
    if (fd >= 0) {
      ::dup2(fd, 1);
      ::dup2(fd, 2);
    }
    // One OpenMP thread: on a busy machine, spinning OpenMP threads make a tiny model's steps
    // ten times slower; the test is about files, not speed.
    ::setenv("OMP_NUM_THREADS", "1", 1);
    std::vector<char*> c_args;
    for (std::string& a : argv) c_args.push_back(a.data());
    c_args.push_back(nullptr);
    ::execv(c_args[0], c_args.data());
    ::_exit(127);
  }
  return pid;
}

std::string read_text(const fs::path& path) {
  std::ifstream in(path);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

// The step of checkpoints/latest ("step_<N>.safetensors"), or -1 when there is none yet.
int64_t latest_checkpoint_step(const fs::path& run_dir) {
  const std::string name = read_text(run_dir / "checkpoints" / "latest");
  if (name.rfind("step_", 0) != 0) return -1;
  return std::stoll(name.substr(5));
}

// The highest step of a training record (one with "loss"), or -1.
int64_t last_logged_step(const fs::path& metrics) {
  if (!fs::exists(metrics)) return -1;
  int64_t last = -1;
  for (const nlohmann::json& r : patchbay::run::read_metrics(metrics))
    if (r.contains("loss")) last = std::max(last, r["step"].get<int64_t>());
  return last;
}

// Owns the scratch folder and the child: kills a child still running and removes the
// folder when the test ends, also when a check fails.
struct Scratch {
  patchbay::testing::TempDir dir = patchbay::train::testing::fresh_folder("kill_resume");
  fs::path folder = dir.path();
  pid_t child = -1;
  ~Scratch() {  // the child first; the folder goes with `dir` afterwards
    if (child > 0) {
      ::kill(child, SIGKILL);
      ::waitpid(child, nullptr, 0);
    }
  }
};

}  // namespace

TEST_CASE("a run killed with SIGKILL after a checkpoint resumes without duplicate metrics") {
  Scratch scratch;
  const fs::path& folder = scratch.folder;
  patchbay::train::testing::write_tiny_corpus(folder);
  std::ofstream(folder / "tiny.toml") << patchbay::train::testing::tiny_config_text(folder);
  const fs::path run_dir = folder / "run";
  const fs::path metrics = run_dir / "metrics.jsonl";
  const fs::path log = folder / "patchbay.log";
  const int64_t max_steps = 200;
  const std::vector<std::string> first_args = {"train",
                                               (folder / "tiny.toml").string(),
                                               "--no-progress",
                                               "--set",
                                               "train.max_steps=" + std::to_string(max_steps),
                                               "--set",
                                               "train.checkpoint_every=20",
                                               "--set",
                                               "train.eval_every=10",
                                               "--set",
                                               "train.sample_tokens=0"};

  // Poll; when the run looks past a checkpoint, freeze it (SIGSTOP) and look again at the
  // frozen files: kill only when metrics hold records after the latest checkpoint's step.
  scratch.child = start_patchbay(first_args, log);
  int64_t checkpoint_step = -1;
  int64_t logged_step = -1;
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(120);
  while (true) {
    int status = 0;
    REQUIRE_MESSAGE(::waitpid(scratch.child, &status, WNOHANG) == 0,
                    "the run ended before it could be killed past a checkpoint:\n"
                        << read_text(log));
    REQUIRE_MESSAGE(std::chrono::steady_clock::now() < deadline, "no checkpoint after 120 s:\n"
                                                                     << read_text(log));
    // Past checkpoint + 10: an evaluation record (eval_every = 10) is among those to drop.
    if (latest_checkpoint_step(run_dir) > 0 &&
        last_logged_step(metrics) > latest_checkpoint_step(run_dir) + 10) {
      ::kill(scratch.child, SIGSTOP);
      checkpoint_step = latest_checkpoint_step(run_dir);
      logged_step = last_logged_step(metrics);
      if (checkpoint_step > 0 && logged_step > checkpoint_step + 10) break;
      ::kill(scratch.child, SIGCONT);
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  ::kill(scratch.child, SIGKILL);
  ::waitpid(scratch.child, nullptr, 0);
  scratch.child = -1;
  INFO("killed at logged step " << logged_step << ", latest checkpoint " << checkpoint_step);
  REQUIRE(logged_step < max_steps);

  // Resume exactly as a user would: the run directory alone (its stored config).
  scratch.child = start_patchbay({"train", "--resume", run_dir.string(), "--no-progress"}, log);
  int status = 0;
  REQUIRE(::waitpid(scratch.child, &status, 0) == scratch.child);
  scratch.child = -1;
  REQUIRE_MESSAGE((WIFEXITED(status) && WEXITSTATUS(status) == 0), "resume failed:\n"
                                                                       << read_text(log));

  std::vector<int64_t> train_steps, eval_steps;
  std::vector<double> elapsed;
  for (const nlohmann::json& r : patchbay::run::read_metrics(metrics)) {
    if (r.contains("loss")) {
      train_steps.push_back(r["step"].get<int64_t>());
      elapsed.push_back(r["elapsed_seconds"].get<double>());
    }
    if (r.contains("val_loss")) eval_steps.push_back(r["step"].get<int64_t>());
  }
  // log_every = 1: every step once, in order, 1 .. max_steps.
  REQUIRE(train_steps.size() == static_cast<size_t>(max_steps));
  for (size_t i = 0; i < train_steps.size(); ++i)
    CHECK(train_steps[i] == static_cast<int64_t>(i) + 1);
  for (size_t i = 1; i < elapsed.size(); ++i) {
    INFO("step " << train_steps[i]);
    CHECK(elapsed[i] >= elapsed[i - 1]);
  }
  REQUIRE(eval_steps.size() == static_cast<size_t>(max_steps / 10));
  for (size_t i = 0; i < eval_steps.size(); ++i)
    CHECK(eval_steps[i] == 10 * (static_cast<int64_t>(i) + 1));
}
