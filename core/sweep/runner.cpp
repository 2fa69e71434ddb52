// The sweep runner; see runner.hpp.
#include "sweep/runner.hpp"

#include <fcntl.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <deque>
#include <fstream>
#include <iostream>
#include <mutex>
#include <thread>

#include "common/error.hpp"
#include "run/atomic_file.hpp"
#include "sweep/job_results.hpp"

extern char** environ;

namespace patchbay::sweep {
namespace fs = std::filesystem;
namespace {

using Clock = std::chrono::steady_clock;

// Signal state: the handler only sets a flag and forwards SIGTERM to running children.
constexpr int kMaxChildren = 256;
std::atomic<int> g_stop_signal{0};
std::atomic<pid_t> g_children[kMaxChildren];

extern "C" void on_stop_signal(int signal_number) {
  g_stop_signal.store(signal_number);
  for (auto& child : g_children) {
    const pid_t pid = child.load();
    if (pid > 0) ::kill(pid, SIGTERM);
  }
}

std::string format_duration(double seconds) {
  const long s = static_cast<long>(seconds + 0.5);
  char text[32];
  if (s >= 3600)
    std::snprintf(text, sizeof text, "%ldh%02ldm", s / 3600, (s % 3600) / 60);
  else
    std::snprintf(text, sizeof text, "%ldm%02lds", s / 60, s % 60);
  return text;
}

// Runs one job as a child process; returns its exit status (128 + signal when killed).
int run_child(const ResolvedJob& job, const RunnerOptions& options, int slot) {
  std::vector<std::string> args{options.executable.string()};
  args.insert(args.end(), options.global_args.begin(), options.global_args.end());
  args.insert(args.end(), {"train", (job.run_dir / "job.toml").string(), "--no-progress"});
  // `latest` is written after its checkpoint file (train/checkpoint.hpp): a job killed while
  // writing its first checkpoint has files but no `latest`, and starts over.
  const bool has_checkpoint = fs::exists(job.run_dir / "checkpoints" / "latest");
  if (has_checkpoint) {
    args.insert(args.end(), {"--resume", job.run_dir.string()});
  } else {
    args.push_back("--overwrite");  // an attempt that died before its first checkpoint
  }
  std::vector<std::string> env;
  for (char** e = environ; *e != nullptr; ++e)
    if (std::strncmp(*e, "OMP_NUM_THREADS=", 16) != 0) env.emplace_back(*e);
  env.push_back("OMP_NUM_THREADS=" + std::to_string(options.threads_per_job));
  std::vector<char*> argv, envp;
  for (std::string& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);
  for (std::string& e : env) envp.push_back(e.data());
  envp.push_back(nullptr);
  const std::string log = (job.run_dir / "sweep_job.log").string();
  {
    std::ofstream header(log, std::ios::app);
    header << "=== sweep: " << (has_checkpoint ? "resuming" : "starting") << " job " << job.id
           << ":";
    for (const std::string& a : args) header << " " << a;
    header << "\n";
  }
  const pid_t parent = ::getpid();
  const pid_t pid = ::fork();
  if (pid < 0)
    throw Error(ErrorKind::kIo, std::string("cannot start a job process: ") + std::strerror(errno));
  if (pid == 0) {
    // Only async-signal-safe calls until exec.
    ::prctl(PR_SET_PDEATHSIG, SIGTERM);
    if (::getppid() != parent) ::_exit(127);
    const int fd = ::open(log.c_str(), O_WRONLY | O_APPEND | O_CREAT, 0644);
    if (fd >= 0) {
      ::dup2(fd, 1);
      ::dup2(fd, 2);
      ::close(fd);
    }
    ::execve(argv[0], argv.data(), envp.data());
    ::_exit(127);
  }
  g_children[slot].store(pid);
  int status = 0;
  while (::waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  g_children[slot].store(0);
  if (WIFEXITED(status)) return WEXITSTATUS(status);
  if (WIFSIGNALED(status)) return 128 + WTERMSIG(status);
  return 1;
}

}  // namespace

std::string file_tail(const fs::path& path, int lines) {
  std::ifstream in(path);
  std::deque<std::string> kept;
  for (std::string line; std::getline(in, line);) {
    kept.push_back(line);
    if (static_cast<int>(kept.size()) > lines) kept.pop_front();
  }
  std::string text;
  for (const std::string& line : kept) text += line + "\n";
  return text;
}

SweepReport run_sweep(const std::vector<ResolvedJob>& jobs, const fs::path& sweep_dir,
                      const std::string& sweep_file, const RunnerOptions& options) {
  const int cores = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  if (options.slots < 1 || options.threads_per_job < 1 ||
      options.slots * options.threads_per_job > cores)
    throw Error(ErrorKind::kInvalidArgument,
                "slots (" + std::to_string(options.slots) + ") x threads per job (" +
                    std::to_string(options.threads_per_job) + ") must be between 1 and the " +
                    std::to_string(cores) + " cores of this machine; lower --jobs or --threads");
  if (options.slots > kMaxChildren) throw Error(ErrorKind::kInvalidArgument, "at most 256 slots");
  const Ledger ledger(sweep_dir);
  ledger.reconcile(jobs, sweep_file);
  for (const ResolvedJob& job : jobs) {
    fs::create_directories(job.run_dir);
    if (!fs::exists(job.run_dir / "job.toml"))
      run::write_text_atomically(job.run_dir / "job.toml", job.frozen_toml);
  }

  SweepReport report;
  report.total = static_cast<int>(jobs.size());
  std::deque<const ResolvedJob*> queue;
  {
    const nlohmann::json document = ledger.read();
    for (const ResolvedJob& job : jobs) {
      const nlohmann::json& entry = document["jobs"][job.id];
      if (entry.value("state", "") == "done")
        ++report.skipped;
      else
        queue.push_back(&job);
    }
  }

  std::mutex mutex;  // guards queue, report, running, finished_seconds
  int running = 0;
  std::vector<double> finished_seconds;  // durations for the ETA, earlier runs' included
  for (const auto& [id, entry] : ledger.read()["jobs"].items())
    if (entry.value("state", "") == "done" && entry.contains("seconds"))
      finished_seconds.push_back(entry["seconds"]);
  std::atomic<bool> stop{false};
  g_stop_signal.store(0);
  for (auto& child : g_children) child.store(0);
  struct sigaction action {
  }, old_int{}, old_term{};
  action.sa_handler = on_stop_signal;
  sigemptyset(&action.sa_mask);
  ::sigaction(SIGINT, &action, &old_int);
  ::sigaction(SIGTERM, &action, &old_term);

  auto print_progress = [&]() {  // with `mutex` held
    if (!options.progress) return;
    const int finished = report.skipped + report.done;
    const int remaining = static_cast<int>(queue.size()) + running;
    std::string eta = "?";
    if (!finished_seconds.empty()) {
      double mean = 0;
      for (double s : finished_seconds) mean += s;
      mean /= static_cast<double>(finished_seconds.size());
      eta = format_duration(mean * remaining / options.slots);
    }
    std::cerr << "sweep: " << finished << "/" << report.total << " done, " << running
              << " running, " << report.failed << " failed, " << queue.size() << " queued; ETA "
              << eta << std::endl;
  };

  auto slot_loop = [&](int slot) {
    while (true) {
      const ResolvedJob* job = nullptr;
      {
        std::lock_guard<std::mutex> lock(mutex);
        if (stop.load() || g_stop_signal.load() != 0 || queue.empty()) return;
        job = queue.front();
        queue.pop_front();
      }
      if (!claim_job(job->run_dir)) {
        std::lock_guard<std::mutex> lock(mutex);
        ++report.not_run;
        std::cerr << "sweep: job " << job->id << " is claimed by another live process; skipped\n";
        continue;
      }
      ledger.update([&](nlohmann::json& d) {
        nlohmann::json& e = d["jobs"][job->id];
        e["state"] = "running";
        e["pid"] = ::getpid();
        e["attempts"] = e.value("attempts", 0) + 1;
      });
      {
        std::lock_guard<std::mutex> lock(mutex);
        ++running;
        print_progress();
      }
      const auto start = Clock::now();
      const int code = run_child(*job, options, slot);
      const double seconds = std::chrono::duration<double>(Clock::now() - start).count();
      const bool interrupted = code != 0 && (g_stop_signal.load() != 0 || stop.load());
      const std::string state = code == 0 ? "done" : interrupted ? "interrupted" : "failed";
      // A finished job's last evaluation (losses, [eval] tasks' metrics): job_results.hpp.
      const nlohmann::json final = code == 0 ? final_evaluation(job->run_dir) : nlohmann::json();
      ledger.update([&](nlohmann::json& d) {
        nlohmann::json& e = d["jobs"][job->id];
        e["state"] = state;
        e["exit_code"] = code;
        e["seconds"] = seconds;
        if (code == 0) e["final"] = final;
        e.erase("pid");
      });
      release_job(job->run_dir);
      std::lock_guard<std::mutex> lock(mutex);
      --running;
      if (code == 0) {
        ++report.done;
        finished_seconds.push_back(seconds);
        if (const std::string scored = final_evaluation_summary(final);
            !scored.empty() && options.progress)
          std::cerr << "sweep: job " << job->id << " (" << job->spec.label() << "): " << scored
                    << std::endl;
      } else if (interrupted) {
        ++report.not_run;
      } else {
        ++report.failed;
        JobFailure failure{job->id, job->spec.label(), code,
                           file_tail(job->run_dir / "sweep_job.log", options.log_tail_lines)};
        std::cerr << "sweep: job " << job->id << " (" << failure.label << ") failed with exit code "
                  << code << "; log: " << (job->run_dir / "sweep_job.log").string() << "\n";
        report.failures.push_back(std::move(failure));
        if (options.fail_fast && !stop.exchange(true)) {
          std::cerr << "sweep: --fail-fast: stopping the running jobs\n";
          for (auto& child : g_children)
            if (const pid_t pid = child.load(); pid > 0) ::kill(pid, SIGTERM);
        }
      }
      print_progress();
    }
  };
  std::vector<std::thread> slots;
  for (int s = 0; s < options.slots; ++s) slots.emplace_back(slot_loop, s);
  for (std::thread& t : slots) t.join();
  ::sigaction(SIGINT, &old_int, nullptr);
  ::sigaction(SIGTERM, &old_term, nullptr);
  // Jobs stopped by fail-fast were killed with SIGTERM and counted as failures above only
  // when they were the failing one; the rest are recorded as interrupted here.
  report.not_run += static_cast<int>(queue.size());
  report.stopped = stop.load() || g_stop_signal.load() != 0;
  return report;
}

}  // namespace patchbay::sweep
