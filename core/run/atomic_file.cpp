// Temporary file + fsync + rename, with errors that name the file and the cause.
#include "run/atomic_file.hpp"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <string>

#include "common/error.hpp"

namespace patchbay::run {
namespace {

[[noreturn]] void fail(const std::filesystem::path& path, const std::string& what, int err) {
  std::string advice = err == ENOSPC || err == EDQUOT
                           ? " The disk is full: free space or choose another output folder."
                           : " Check that the folder exists and is writable.";
  throw Error(ErrorKind::kIo, "cannot write '" + path.string() + "': " + what + " failed (" +
                                  std::strerror(err) + ")." + advice +
                                  " The previous file, if any, is unchanged.");
}

class FdWriter final : public AtomicWriter {
 public:
  FdWriter(int fd, const std::filesystem::path& target) : fd_(fd), target_(target) {}
  using AtomicWriter::write;
  void write(const void* data, std::size_t bytes) override {
    const char* p = static_cast<const char*>(data);
    while (bytes > 0) {
      ssize_t n = ::write(fd_, p, bytes);
      if (n < 0) {
        if (errno == EINTR) continue;
        fail(target_, "write", errno);
      }
      p += n;
      bytes -= static_cast<std::size_t>(n);
    }
  }

 private:
  int fd_;
  const std::filesystem::path& target_;
};

void fsync_folder(const std::filesystem::path& folder) {
  int dfd = ::open(folder.empty() ? "." : folder.c_str(), O_RDONLY | O_DIRECTORY);
  if (dfd >= 0) {
    ::fsync(dfd);  // best effort: some file systems refuse fsync on folders
    ::close(dfd);
  }
}

}  // namespace

void write_file_atomically(const std::filesystem::path& path,
                           const std::function<void(AtomicWriter&)>& fill) {
  const auto folder = path.parent_path();
  if (!folder.empty()) {
    std::error_code ec;
    std::filesystem::create_directories(folder, ec);
    if (ec) fail(path, "creating folder '" + folder.string() + "'", ec.value());
  }
  const std::filesystem::path temp = path.string() + ".tmp-" + std::to_string(::getpid());
  int fd = ::open(temp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) fail(path, "creating temporary '" + temp.string() + "'", errno);
  try {
    FdWriter writer(fd, path);
    fill(writer);
    if (::fsync(fd) != 0) fail(path, "fsync", errno);
    if (::close(fd) != 0) {
      fd = -1;
      fail(path, "close", errno);
    }
    fd = -1;
    if (::rename(temp.c_str(), path.c_str()) != 0) fail(path, "rename", errno);
  } catch (...) {
    if (fd >= 0) ::close(fd);
    ::unlink(temp.c_str());
    throw;
  }
  fsync_folder(folder);
}

void write_text_atomically(const std::filesystem::path& path, std::string_view text) {
  write_file_atomically(path, [&](AtomicWriter& w) { w.write(text); });
}

}  // namespace patchbay::run
