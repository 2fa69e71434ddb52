// patchbay::testing::TempDir: a fresh empty folder per object (unique per process and call),
// removed with its contents when the object dies, also when a test fails by exception.
#include "patchbay/testing/temp_dir.hpp"

#include <doctest/doctest.h>

#include <filesystem>
#include <fstream>
#include <stdexcept>
#include <string>

namespace fs = std::filesystem;
using patchbay::testing::TempDir;

TEST_CASE("each TempDir is a new empty folder under the temp folder, removed by its destructor") {
  fs::path kept;
  {
    const TempDir a("sdk_helpers");
    const TempDir b("sdk_helpers");
    CHECK(a.path() != b.path());
    CHECK(fs::is_directory(a.path()));
    CHECK(fs::is_empty(a.path()));
    CHECK(a.path().parent_path() == fs::temp_directory_path());
    CHECK(a.path().filename().string().rfind("patchbay_sdk_helpers_", 0) == 0);
    fs::create_directories(a / "nested" / "deeper");
    std::ofstream(a / "nested" / "deeper" / "file.txt") << "contents";
    kept = a.path();
  }
  CHECK(!fs::exists(kept));
}

TEST_CASE("the folder goes away when the test body throws") {
  fs::path seen;
  try {
    const TempDir dir("sdk_helpers");
    seen = dir.path();
    std::ofstream(dir / "partial.bin") << "half written";
    throw std::runtime_error("a REQUIRE failing here throws the same way");
  } catch (const std::runtime_error&) {
  }
  REQUIRE(!seen.empty());
  CHECK(!fs::exists(seen));
}

TEST_CASE("a parent folder can be given; moving hands over ownership") {
  const TempDir parent("sdk_helpers");
  TempDir inner("child", parent.path());
  CHECK(inner.path().parent_path() == parent.path());
  const fs::path inner_path = inner.path();
  TempDir moved = std::move(inner);
  CHECK(moved.path() == inner_path);
  CHECK(
      inner.path().empty());  // NOLINT(bugprone-use-after-move): the moved-from state is specified
  CHECK(fs::is_directory(inner_path));
  const fs::path& as_path = moved;  // converts where a folder path is expected
  CHECK(as_path == inner_path);
  CHECK(moved.string() == inner_path.string());
}

TEST_CASE("a folder that cannot be made is an error naming it") {
  CHECK_THROWS_WITH_AS(TempDir("x", "/proc/patchbay_no_such_parent"),
                       doctest::Contains("patchbay_no_such_parent"), std::exception);
}
