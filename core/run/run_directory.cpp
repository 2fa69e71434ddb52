// Run-directory ownership: the --resume path's run directory, the flock, stale temporaries.
#include "run/run_directory.hpp"

#include <fcntl.h>
#include <signal.h>
#include <sys/file.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <fstream>
#include <sstream>

#include "common/error.hpp"

namespace patchbay::run {

namespace fs = std::filesystem;

fs::path run_dir_of_resume_path(const fs::path& resume) {
  const fs::path path = resume.lexically_normal();
  const fs::path clean = path.has_filename() ? path : path.parent_path();  // "run/" -> "run"
  if (fs::is_directory(clean)) {
    // A checkpoints/ folder (it holds `latest` or step files): its parent is the run.
    if (clean.filename() == "checkpoints" && !fs::exists(clean / "checkpoints")) {
      return clean.has_parent_path() ? clean.parent_path() : fs::path(".");
    }
    return clean;
  }
  const fs::path folder = clean.has_parent_path() ? clean.parent_path() : fs::path(".");
  if (folder.filename() == "checkpoints")
    return folder.has_parent_path() ? folder.parent_path() : fs::path(".");
  return folder;
}

namespace {

// "pid <n>: <command line>" of a lock file's owner, from what it wrote; "" when unreadable.
std::string describe_owner(int fd) {
  char buffer[512];
  const ssize_t n = ::pread(fd, buffer, sizeof buffer - 1, 0);
  if (n <= 0) return "";
  std::string text(buffer, static_cast<std::size_t>(n));
  while (!text.empty() && (text.back() == '\n' || text.back() == '\0')) text.pop_back();
  return text;
}

// This process's command line, arguments separated by spaces (best effort, for the message).
std::string own_command_line() {
  std::ifstream in("/proc/self/cmdline", std::ios::binary);
  std::string line((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  for (char& c : line)
    if (c == '\0') c = ' ';
  while (!line.empty() && line.back() == ' ') line.pop_back();
  return line.size() > 300 ? line.substr(0, 300) + "..." : line;
}

}  // namespace

RunDirectoryLock::RunDirectoryLock(const fs::path& run_dir) {
  std::error_code ec;
  fs::create_directories(run_dir, ec);
  const fs::path file = run_dir / kFileName;
  fd_ = ::open(file.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644);
  if (fd_ < 0)
    throw Error(ErrorKind::kIo, "cannot open the run directory's lock file '" + file.string() +
                                    "' (" + std::strerror(errno) +
                                    "); check that the run directory is writable");
  if (::flock(fd_, LOCK_EX | LOCK_NB) != 0) {
    const int err = errno;
    const std::string owner = describe_owner(fd_);
    ::close(fd_);
    fd_ = -1;
    if (err != EWOULDBLOCK)
      throw Error(ErrorKind::kIo,
                  "cannot lock '" + file.string() + "' (" + std::strerror(err) + ")");
    throw Error(ErrorKind::kIo,
                "run directory '" + run_dir.string() + "' is in use by another process (" +
                    (owner.empty() ? std::string("its pid is not recorded") : owner) +
                    "). Two processes writing one run would interleave its metrics and "
                    "checkpoints: wait for that one to finish or stop it, or train under "
                    "another name (--set run.name=...).");
  }
  const std::string owner = "pid " + std::to_string(::getpid()) + ": " + own_command_line() + "\n";
  if (::ftruncate(fd_, 0) == 0) {
    const ssize_t written = ::pwrite(fd_, owner.data(), owner.size(), 0);
    (void)written;  // the description is for messages only; the flock is the lock
  }
}

RunDirectoryLock::~RunDirectoryLock() {
  if (fd_ >= 0) ::close(fd_);  // closing drops the flock
}

std::vector<fs::path> remove_stale_temporaries(const fs::path& folder) {
  std::vector<fs::path> removed;
  std::error_code ec;
  if (!fs::is_directory(folder, ec)) return removed;
  for (const fs::directory_entry& entry : fs::directory_iterator(folder, ec)) {
    const std::string name = entry.path().filename().string();
    const std::size_t mark = name.rfind(".tmp-");
    if (mark == std::string::npos || mark + 5 >= name.size()) continue;
    const std::string digits = name.substr(mark + 5);
    if (digits.size() > 9 || digits.find_first_not_of("0123456789") != std::string::npos) continue;
    const pid_t pid = static_cast<pid_t>(std::stol(digits));
    if (pid == ::getpid()) continue;
    if (pid > 0 && (::kill(pid, 0) == 0 || errno == EPERM)) continue;  // that writer still runs
    if (fs::remove(entry.path(), ec)) removed.push_back(entry.path());
  }
  return removed;
}

}  // namespace patchbay::run
