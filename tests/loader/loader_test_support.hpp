// Helpers shared by the loader tests: fixture paths, scratch folders, and "scan this one file
// and return why it was refused".
#pragma once

#include <doctest/doctest.h>

#include <filesystem>
#include <fstream>
#include <optional>
#include <string>

#include "patchbay/testing/temp_dir.hpp"
#include "runtime/registry.hpp"

namespace loader_test {

namespace fs = std::filesystem;

inline fs::path fixture(const std::string& name) {
  return fs::path(PATCHBAY_LOADER_FIXTURES_DIR) / (name + ".so");
}

// A fresh folder (patchbay::testing::TempDir) removed when the object dies, with helpers
// to fill it.
class ScratchFolder {
 public:
  explicit ScratchFolder(const std::string& tag) : dir_("loader_" + tag) {}
  const fs::path& path() const { return dir_.path(); }
  fs::path write(const std::string& name, const std::string& bytes) const {
    const fs::path file = dir_ / name;
    std::ofstream(file, std::ios::binary) << bytes;
    return file;
  }
  fs::path copy_in(const fs::path& from, const std::string& name) const {
    fs::copy_file(from, dir_ / name);
    return dir_ / name;
  }

 private:
  patchbay::testing::TempDir dir_;
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
