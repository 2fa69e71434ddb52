// drop_metrics_after: what a resumed run does to metrics.jsonl before appending — records
// after the checkpoint's step go, earlier ones stay byte for byte, a torn last line goes,
// and the file is replaced atomically (no temporary left beside it).
#include <doctest/doctest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

#include "common/error.hpp"
#include "run/metrics_log.hpp"

namespace fs = std::filesystem;
using namespace patchbay::run;

namespace {

// A scratch folder removed when the test ends, also when a check throws.
struct ScratchFolder {
  fs::path path;
  explicit ScratchFolder(const std::string& name)
      : path(fs::temp_directory_path() /
             ("patchbay_metrics_resume_" + name + "_" + std::to_string(::getpid()))) {
    fs::remove_all(path);
    fs::create_directories(path);
  }
  ~ScratchFolder() {
    std::error_code ignored;
    fs::remove_all(path, ignored);
  }
};

std::string read_all(const fs::path& path) {
  std::ifstream in(path);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

void write_all(const fs::path& path, const std::string& text) { std::ofstream(path) << text; }

}  // namespace

TEST_CASE("records after the checkpoint's step are dropped, earlier ones kept byte for byte") {
  ScratchFolder scratch("drop");
  const fs::path file = scratch.path / "metrics.jsonl";
  const std::string kept =
      "{\"step\": 1, \"loss\": 3.5, \"elapsed_seconds\": 0.25}\n"
      "{\"note\": \"a record without a step stays\"}\n"
      "{\"step\":2,\"loss\":3.25}\n"
      "{\"step\": 2, \"val_loss\": 3.3}\n";
  write_all(file, kept +
                      "{\"step\": 3, \"loss\": 3.0}\n"
                      "{\"step\": 4, \"loss\": 2.9}\n"
                      "{\"step\": 4, \"val_loss\": 2.95}\n"
                      "{\"step\": 5, \"lo");  // torn by a kill mid-append
  CHECK(drop_metrics_after(file, 2) == 4);
  CHECK(read_all(file) == kept);
  for (const auto& entry : fs::directory_iterator(scratch.path))
    CHECK(entry.path().filename() == "metrics.jsonl");

  CHECK(drop_metrics_after(file, 2) == 0);  // idempotent
  CHECK(read_all(file) == kept);
  CHECK(drop_metrics_after(file, 0) == 3);  // only the step-less record is left
  CHECK(read_all(file) == "{\"note\": \"a record without a step stays\"}\n");
}

TEST_CASE("a missing metrics file stays missing; a corrupt middle line is an error naming it") {
  ScratchFolder scratch("errors");
  const fs::path file = scratch.path / "metrics.jsonl";
  CHECK(drop_metrics_after(file, 10) == 0);
  CHECK_FALSE(fs::exists(file));

  const std::string corrupt = "{\"step\": 1}\nnot json\n{\"step\": 2}\n";
  write_all(file, corrupt);
  CHECK_THROWS_WITH_AS(drop_metrics_after(file, 1), doctest::Contains("metrics.jsonl:2"),
                       patchbay::Error);
  CHECK(read_all(file) == corrupt);  // untouched
}
