// The sweep ledger and job claims; see ledger.hpp.
#include "sweep/ledger.hpp"

#include <fcntl.h>
#include <signal.h>
#include <sys/file.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstring>
#include <fstream>
#include <sstream>

#include "common/error.hpp"
#include "run/atomic_file.hpp"

namespace patchbay::sweep {
namespace fs = std::filesystem;
namespace {

// Holds an exclusive flock for its lifetime.
class FileLock {
 public:
  explicit FileLock(const fs::path& path) {
    fd_ = ::open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644);
    if (fd_ < 0)
      throw Error(ErrorKind::kIo, "cannot open the ledger lock '" + path.string() +
                                      "': " + std::strerror(errno) +
                                      "; check that the sweep directory is writable");
    while (::flock(fd_, LOCK_EX) != 0 && errno == EINTR) {
    }
  }
  ~FileLock() {
    ::flock(fd_, LOCK_UN);
    ::close(fd_);
  }
  FileLock(const FileLock&) = delete;
  FileLock& operator=(const FileLock&) = delete;

 private:
  int fd_ = -1;
};

std::string now_text() {
  const auto seconds = std::chrono::duration_cast<std::chrono::seconds>(
                           std::chrono::system_clock::now().time_since_epoch())
                           .count();
  return std::to_string(seconds);
}

nlohmann::json read_unlocked(const fs::path& path) {
  std::ifstream in(path);
  if (!in) return nlohmann::json{{"jobs", nlohmann::json::object()}};
  try {
    nlohmann::json document = nlohmann::json::parse(in);
    if (!document.contains("jobs")) document["jobs"] = nlohmann::json::object();
    return document;
  } catch (const nlohmann::json::exception& e) {
    throw Error(ErrorKind::kIo, "the sweep ledger '" + path.string() + "' is not valid JSON (" +
                                    e.what() +
                                    "); restore it or start the sweep in a new directory (--out)");
  }
}

}  // namespace

bool process_alive(long pid) {
  return pid > 0 && (::kill(static_cast<pid_t>(pid), 0) == 0 || errno == EPERM);
}

Ledger::Ledger(fs::path sweep_dir)
    : dir_(std::move(sweep_dir)), path_(dir_ / "ledger.json"), lock_path_(dir_ / "ledger.lock") {
  fs::create_directories(dir_);
}

nlohmann::json Ledger::read() const {
  FileLock lock(lock_path_);
  return read_unlocked(path_);
}

void Ledger::update(const std::function<void(nlohmann::json&)>& change) const {
  FileLock lock(lock_path_);
  nlohmann::json document = read_unlocked(path_);
  change(document);
  run::write_text_atomically(path_, document.dump(1) + "\n");
}

void Ledger::reconcile(const std::vector<ResolvedJob>& jobs, const std::string& sweep_file) const {
  update([&](nlohmann::json& document) {
    std::vector<std::string> lost;
    for (const auto& [id, entry] : document["jobs"].items()) {
      if (entry.value("state", "") != "done") continue;
      bool present = false;
      for (const ResolvedJob& job : jobs) present = present || job.id == id;
      if (!present)
        lost.push_back(id + " (" + entry.value("label", "?") + ", seed " +
                       std::to_string(entry.value("seed", int64_t{0})) + ")");
    }
    if (!lost.empty()) {
      std::string list;
      for (const std::string& item : lost) list += "\n  " + item;
      throw Error(ErrorKind::kInvalidArgument,
                  "the sweep file changed in a way that alters finished jobs: " +
                      std::to_string(lost.size()) + " job(s) the ledger " + path_.string() +
                      " has as done are no longer in the sweep:" + list +
                      "\nRestore the sweep file, or run the changed sweep in a new directory "
                      "(--out DIR or a new "
                      "name = ...). Adding jobs (more seeds, more values) is allowed.");
    }
    // Unfinished entries of jobs no longer in the sweep (values removed) are dropped.
    std::vector<std::string> dropped;
    for (const auto& [id, entry] : document["jobs"].items()) {
      bool present = false;
      for (const ResolvedJob& job : jobs) present = present || job.id == id;
      if (!present) dropped.push_back(id);
    }
    for (const std::string& id : dropped) document["jobs"].erase(id);
    document["sweep_file"] = sweep_file;
    document["updated"] = now_text();
    for (const ResolvedJob& job : jobs) {
      nlohmann::json& entry = document["jobs"][job.id];
      if (!entry.contains("state")) {
        entry["state"] = "pending";
        entry["attempts"] = 0;
      }
      entry["index"] = job.spec.index;
      entry["label"] = job.spec.label();
      entry["overrides"] = job.spec.all_overrides;
      entry["config_id"] = job.config_id;
      entry["seed"] = job.spec.seed;
      entry["run_dir"] = job.run_dir.string();
      nlohmann::json plugins = nlohmann::json::array();
      for (const PluginUse& use : job.plugins)
        plugins.push_back({{"kind", use.kind}, {"name", use.name}, {"file", use.file}});
      entry["plugins"] = std::move(plugins);
    }
  });
}

std::vector<PluginUse> recorded_plugin_uses(const fs::path& sweep_dir) {
  std::vector<PluginUse> uses;
  if (!fs::exists(sweep_dir / "ledger.json")) return uses;
  const nlohmann::json document = Ledger(sweep_dir).read();
  for (const auto& [id, entry] : document["jobs"].items()) {
    if (!entry.contains("plugins") || !entry["plugins"].is_array()) continue;
    for (const nlohmann::json& p : entry["plugins"]) {
      PluginUse use{p.value("kind", ""), p.value("name", ""), p.value("file", "")};
      bool known = false;
      for (const PluginUse& u : uses)
        known = known || (u.kind == use.kind && u.name == use.name && u.file == use.file);
      if (!known) uses.push_back(std::move(use));
    }
  }
  return uses;
}

bool claim_job(const fs::path& run_dir) {
  fs::create_directories(run_dir);
  const fs::path claim = run_dir / "claim.lock";
  for (int attempt = 0; attempt < 2; ++attempt) {
    const int fd = ::open(claim.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
    if (fd >= 0) {
      const std::string pid = std::to_string(::getpid()) + "\n";
      const ssize_t written = ::write(fd, pid.data(), pid.size());
      ::close(fd);
      if (written != static_cast<ssize_t>(pid.size()))
        throw Error(ErrorKind::kIo, "cannot write the claim " + claim.string());
      return true;
    }
    if (errno != EEXIST)
      throw Error(ErrorKind::kIo,
                  "cannot create the claim " + claim.string() + ": " + std::strerror(errno));
    long holder = 0;
    std::ifstream(claim) >> holder;
    if (process_alive(holder) && holder != ::getpid()) return false;
    fs::remove(claim);  // stale: its process is gone
  }
  return false;
}

void release_job(const fs::path& run_dir) { fs::remove(run_dir / "claim.lock"); }

}  // namespace patchbay::sweep
