// metrics.jsonl: one object per line, appended across reopenings, NaN kept as null.
#include <doctest/doctest.h>

#include <cmath>
#include <unistd.h>

#include <filesystem>
#include <fstream>

#include "run/metrics_log.hpp"

namespace fs = std::filesystem;
using namespace patchbay::run;

TEST_CASE("metrics are appended as JSON lines and survive reopening") {
  const auto path = fs::temp_directory_path() / ("pb_metrics_" + std::to_string(::getpid())) / "metrics.jsonl";
  fs::remove(path);
  {
    MetricsLog log(path);
    log.append({{"step", 1}, {"loss", 2.5}});
    log.append({{"step", 2}, {"loss", std::nan("")}});
  }
  {
    MetricsLog log(path);  // a resumed run appends
    log.append({{"step", 3}, {"loss", 2.0}});
  }
  auto records = read_metrics(path);
  REQUIRE(records.size() == 3);
  CHECK(records[0]["loss"].get<double>() == doctest::Approx(2.5));
  CHECK(records[1]["loss"].is_null());
  CHECK(records[2]["step"].get<int>() == 3);
}

TEST_CASE("a torn last line from a crash is skipped, earlier records kept") {
  const auto path = fs::temp_directory_path() / ("pb_metrics2_" + std::to_string(::getpid())) / "m.jsonl";
  fs::create_directories(path.parent_path());
  {
    std::ofstream out(path);
    out << "{\"step\": 1}\n{\"step\": 2, \"lo";
  }
  auto records = read_metrics(path);
  CHECK(records.size() == 1);
}
