// metrics.jsonl: one object per line, appended across reopenings, NaN kept as null.
#include "run/metrics_log.hpp"

#include <doctest/doctest.h>

#include <cmath>
#include <filesystem>
#include <fstream>

#include "patchbay/testing/temp_dir.hpp"

namespace fs = std::filesystem;
using namespace patchbay::run;

TEST_CASE("metrics are appended as JSON lines and survive reopening") {
  const patchbay::testing::TempDir scratch("metrics");
  const auto path = scratch / "metrics.jsonl";
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
  const patchbay::testing::TempDir scratch("metrics");
  const auto path = scratch / "m.jsonl";
  {
    std::ofstream out(path);
    out << "{\"step\": 1}\n{\"step\": 2, \"lo";
  }
  auto records = read_metrics(path);
  CHECK(records.size() == 1);
}
