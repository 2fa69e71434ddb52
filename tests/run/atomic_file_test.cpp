// Atomic replacement: a failing writer leaves the previous file intact and no temporary.
#include "run/atomic_file.hpp"

#include <doctest/doctest.h>

#include <filesystem>
#include <fstream>
#include <sstream>

#include "common/error.hpp"
#include "patchbay/testing/temp_dir.hpp"

namespace fs = std::filesystem;
using namespace patchbay::run;

namespace {
std::string read_all(const fs::path& p) {
  std::ifstream in(p);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}
}  // namespace

TEST_CASE("write_text_atomically creates folders and replaces the file") {
  const patchbay::testing::TempDir scratch("atomic");
  const auto dir = scratch / "x";
  const auto path = dir / "f.txt";
  write_text_atomically(path, "first");
  CHECK(read_all(path) == "first");
  write_text_atomically(path, "second");
  CHECK(read_all(path) == "second");
}

TEST_CASE("a writer that fails midway keeps the old contents and removes the temporary") {
  const patchbay::testing::TempDir scratch("atomic");
  const auto& dir = scratch.path();
  const auto path = dir / "f.txt";
  write_text_atomically(path, "good");
  CHECK_THROWS_AS(write_file_atomically(path,
                                        [](AtomicWriter& w) {
                                          w.write("partial");
                                          throw patchbay::Error(patchbay::ErrorKind::kIo, "boom");
                                        }),
                  patchbay::Error);
  CHECK(read_all(path) == "good");
  int files = 0;
  for ([[maybe_unused]] const auto& e : fs::directory_iterator(dir)) ++files;
  CHECK(files == 1);
}

TEST_CASE("a full disk is reported with the file name and what to do") {
  // /dev/full accepts the open but every write fails with ENOSPC; writing "through" it
  // is impossible, so check the message on a folder path that cannot be created instead
  // when /dev/full is unusable as a target (rename onto a device is refused).
  const fs::path path = "/proc/patchbay-cannot-write-here/file.txt";
  try {
    write_text_atomically(path, "x");
    FAIL("expected an error");
  } catch (const patchbay::Error& e) {
    const std::string msg = e.what();
    CHECK(msg.find("/proc/patchbay-cannot-write-here/file.txt") != std::string::npos);
    CHECK(msg.find("unchanged") != std::string::npos);
  }
}
