// A run killed with SIGKILL and resumed with --resume, as a user would do it: the real
// `patchbay train` process is stopped while it is past a checkpoint (so metrics.jsonl holds
// records the checkpoint does not cover), killed, and resumed. The finished metrics.jsonl must
// hold each training step once, in order, with elapsed_seconds never going back, and each
// evaluation step once. The same on prepared token shards (patchbay data prepare, read in
// epochs): the resumed run must end bit for bit where an uninterrupted one ends, every step's
// loss equal.
#include <doctest/doctest.h>
#include <fcntl.h>
#include <signal.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "run/metrics_log.hpp"
#include "train/checkpoint.hpp"
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

// Runs `patchbay ARGS...` to its end; true when it exited with 0.
bool run_patchbay(const std::vector<std::string>& args, const fs::path& log) {
  const pid_t pid = start_patchbay(args, log);
  int status = 0;
  REQUIRE(::waitpid(pid, &status, 0) == pid);
  return WIFEXITED(status) && WEXITSTATUS(status) == 0;
}

// Training losses by step (a step logged twice would overwrite: counted separately).
std::map<int64_t, double> losses_by_step(const fs::path& metrics, size_t& records) {
  std::map<int64_t, double> losses;
  records = 0;
  for (const nlohmann::json& r : patchbay::run::read_metrics(metrics))
    if (r.contains("loss")) {
      losses[r["step"].get<int64_t>()] = r["loss"].get<double>();
      ++records;
    }
  return losses;
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

TEST_CASE(
    "a run on prepared shards killed with SIGKILL resumes to the uninterrupted run's end, bit for "
    "bit") {
  Scratch scratch;
  const fs::path& folder = scratch.folder;
  const fs::path log = folder / "patchbay.log";
  patchbay::train::testing::write_tiny_corpus(folder);
  fs::create_directories(folder / "docs");  // 40 documents of ~1 KB, prepared into 4 KB shards
  const std::string text = read_text(folder / "corpus.txt");
  for (int d = 0; d < 40; ++d)
    std::ofstream(folder / "docs" / (std::string("d") + std::to_string(100 + d) + ".txt"))
        << text.substr(d * 1000, 1000);
  REQUIRE_MESSAGE(
      run_patchbay({"tokenizer", "train", "--kind", "char", "--input",
                    (folder / "corpus.txt").string(), "--out", (folder / "char.tok").string()},
                   log),
      read_text(log));
  REQUIRE_MESSAGE(
      run_patchbay({"data", "prepare", "--source", (folder / "docs").string(), "--tokenizer",
                    (folder / "char.tok").string(), "--out", (folder / "prepared").string(),
                    "--val-fraction", "0.2", "--shard-mb", "0.004"},
                   log),
      read_text(log));
  std::ofstream(folder / "tiny.toml") << patchbay::train::testing::tiny_config_text(folder);
  const int64_t max_steps = 80;
  auto train_args = [&](const std::string& out) {
    return std::vector<std::string>{"train",
                                    (folder / "tiny.toml").string(),
                                    "--no-progress",
                                    "--set",
                                    "data.prepared=\"" + (folder / "prepared").string() + "\"",
                                    "--set",
                                    "data.sampling=\"epochs\"",
                                    "--set",
                                    "train.max_steps=" + std::to_string(max_steps),
                                    "--set",
                                    "train.checkpoint_every=10",
                                    "--set",
                                    "train.eval_every=10",
                                    "--set",
                                    "train.sample_tokens=0",
                                    "--set",
                                    "train.out_dir=\"" + (folder / out).string() + "\""};
  };
  REQUIRE_MESSAGE(run_patchbay(train_args("straight"), log), read_text(log));

  const fs::path run_dir = folder / "killed";
  scratch.child = start_patchbay(train_args("killed"), log);
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(120);
  int64_t checkpoint_step = -1, logged_step = -1;
  while (true) {
    int status = 0;
    REQUIRE_MESSAGE(::waitpid(scratch.child, &status, WNOHANG) == 0,
                    "the run ended before it could be killed past a checkpoint:\n"
                        << read_text(log));
    REQUIRE_MESSAGE(std::chrono::steady_clock::now() < deadline, "no checkpoint after 120 s:\n"
                                                                     << read_text(log));
    if (latest_checkpoint_step(run_dir) > 0 &&
        last_logged_step(run_dir / "metrics.jsonl") > latest_checkpoint_step(run_dir) + 3) {
      ::kill(scratch.child, SIGSTOP);
      checkpoint_step = latest_checkpoint_step(run_dir);
      logged_step = last_logged_step(run_dir / "metrics.jsonl");
      if (checkpoint_step > 0 && logged_step > checkpoint_step + 3) break;
      ::kill(scratch.child, SIGCONT);
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  ::kill(scratch.child, SIGKILL);
  ::waitpid(scratch.child, nullptr, 0);
  scratch.child = -1;
  INFO("killed at logged step " << logged_step << ", latest checkpoint " << checkpoint_step);
  REQUIRE(logged_step < max_steps);
  REQUIRE_MESSAGE(run_patchbay({"train", "--resume", run_dir.string(), "--no-progress"}, log),
                  read_text(log));

  // Every step once, each loss equal to the uninterrupted run's; the final weights and
  // optimizer state equal bit for bit.
  size_t straight_records = 0, resumed_records = 0;
  const std::map<int64_t, double> straight =
      losses_by_step(folder / "straight" / "metrics.jsonl", straight_records);
  const std::map<int64_t, double> resumed =
      losses_by_step(run_dir / "metrics.jsonl", resumed_records);
  CHECK(straight_records == static_cast<size_t>(max_steps));
  CHECK(resumed_records == static_cast<size_t>(max_steps));
  CHECK(resumed == straight);
  const patchbay::train::Checkpoint a = patchbay::train::load_checkpoint(folder / "straight");
  const patchbay::train::Checkpoint b = patchbay::train::load_checkpoint(run_dir);
  CHECK(a.step() == max_steps);
  CHECK(b.step() == max_steps);
  REQUIRE(a.names() == b.names());
  for (const std::string& name : a.names()) {
    CAPTURE(name);
    const patchbay::engine::Tensor x = a.tensor(name), y = b.tensor(name);
    CHECK(std::memcmp(x.data_ptr(), y.data_ptr(), x.nbytes()) == 0);
  }
}
