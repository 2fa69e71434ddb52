// Helpers shared by the loader tests: fixture paths, scratch folders, and "scan this one file
// and return why it was refused".
#pragma once

#include <doctest/doctest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <optional>
#include <string>

#include "runtime/registry.hpp"

namespace loader_test {

namespace fs = std::filesystem;

inline fs::path fixture(const std::string& name) {
  return fs::path(PATCHBAY_LOADER_FIXTURES_DIR) / (name + ".so");
}

// A fresh folder removed when the object dies.
class ScratchFolder {
 public:
  explicit ScratchFolder(const std::string& tag) {
    static int counter = 0;
    path_ = fs::temp_directory_path() / ("patchbay-loader-" + tag + "-" + std::to_string(getpid()) +
                                         "-" + std::to_string(counter++));
    fs::remove_all(path_);
    fs::create_directories(path_);
  }
  ~ScratchFolder() {
    std::error_code ec;
    fs::remove_all(path_, ec);
  }
  const fs::path& path() const { return path_; }
  fs::path write(const std::string& name, const std::string& bytes) const {
    const fs::path file = path_ / name;
    std::ofstream(file, std::ios::binary) << bytes;
    return file;
  }
  fs::path copy_in(const fs::path& from, const std::string& name) const {
    fs::copy_file(from, path_ / name);
    return path_ / name;
  }

 private:
  fs::path path_;
};

// Scans one file and returns the refusal reason; fails the test if it was not refused.
inline std::string refusal_of(const fs::path& file) {
  patchbay::runtime::Registry registry;
  registry.scan_file(file);
  CHECK(registry.plugins().empty());
  REQUIRE(registry.refused().size() == 1);
  CHECK(registry.refused()[0].file == file);
  return registry.refused()[0].reason;
}

inline bool contains(const std::string& text, const std::string& part) {
  return text.find(part) != std::string::npos;
}

}  // namespace loader_test
