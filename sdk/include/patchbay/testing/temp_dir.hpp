// Patchbay SDK testing helper, header-only: a scratch folder for one test that cleans up
// after itself.
//
//   patchbay::testing::TempDir dir("bpe_save");   // <tmp>/patchbay_bpe_save_<pid>_XXXXXX
//   tokenizer.save((dir / "vocab.tok").string());
//
// The folder is made by mkdtemp, so its name is unique across processes (ctest -j) and
// across calls in one process, and it is created empty and readable only by this user. The
// destructor removes it with everything inside, so it also goes away when a test fails by
// exception (doctest's REQUIRE and FAIL throw) and the stack unwinds. Nothing survives a
// crash (a signal kills the process before any destructor runs).
//
// <tmp> is std::filesystem::temp_directory_path() ($TMPDIR, else /tmp) unless a parent
// folder is given. Not copyable; movable (the moved-from object owns nothing).
#pragma once

#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <stdexcept>
#include <string>
#include <string_view>
#include <system_error>
#include <utility>
#include <vector>

namespace patchbay::testing {

class TempDir {
 public:
  // `tag` names the folder for people reading a listing ([A-Za-z0-9_-] keeps it simple).
  // Throws std::runtime_error naming the folder and the system's reason when it cannot be
  // created.
  explicit TempDir(std::string_view tag = "test",
                   const std::filesystem::path& parent = std::filesystem::temp_directory_path()) {
    std::filesystem::create_directories(parent);
    std::string pattern =
        (parent / ("patchbay_" + std::string(tag) + "_" + std::to_string(::getpid()) + "_XXXXXX"))
            .string();
    std::vector<char> buffer(pattern.begin(), pattern.end());
    buffer.push_back('\0');
    if (::mkdtemp(buffer.data()) == nullptr) {
      throw std::runtime_error("cannot create a temporary folder '" + pattern +
                               "': " + std::strerror(errno));
    }
    path_ = std::filesystem::path(buffer.data());
  }
  ~TempDir() { remove(); }

  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;
  TempDir(TempDir&& other) noexcept : path_(std::exchange(other.path_, {})) {}
  TempDir& operator=(TempDir&& other) noexcept {
    if (this != &other) {
      remove();
      path_ = std::exchange(other.path_, {});
    }
    return *this;
  }

  const std::filesystem::path& path() const { return path_; }
  // Lets a TempDir stand wherever a folder path is expected.
  operator const std::filesystem::path&() const {
    return path_;
  }  // NOLINT(google-explicit-constructor)
  std::filesystem::path operator/(const std::filesystem::path& name) const { return path_ / name; }
  // The path as a string, for APIs that take one (configs, command lines).
  std::string string() const { return path_.string(); }

 private:
  void remove() noexcept {
    if (path_.empty()) return;
    std::error_code ignored;  // a destructor must not throw; a leftover is all that can go wrong
    std::filesystem::remove_all(path_, ignored);
    path_.clear();
  }

  std::filesystem::path path_;
};

}  // namespace patchbay::testing
