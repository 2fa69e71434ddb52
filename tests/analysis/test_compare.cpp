// The compare table over synthetic run directories (config.toml, metrics.jsonl,
// model_size.json as `patchbay train` writes them): grouping by configuration with the seed
// removed, the paired test when seeds match, the output formats, and the gnuplot plots
// (PNG and SVG written, non-empty) for the table and the scaling fit.
#include <doctest/doctest.h>
#include <unistd.h>

#include <cmath>
#include <filesystem>
#include <fstream>

#include "analysis/compare_table.hpp"
#include "analysis/plots.hpp"
#include "analysis/run_results.hpp"
#include "analysis/scaling_report.hpp"

using namespace patchbay::analysis;
namespace fs = std::filesystem;

namespace {

struct TempFolder {
  fs::path path =
      fs::temp_directory_path() / ("patchbay_compare_test_" + std::to_string(::getpid()));
  TempFolder() {
    fs::remove_all(path);
    fs::create_directories(path);
  }
  ~TempFolder() { fs::remove_all(path); }
};

void write_run(const fs::path& dir, const std::string& positional, int seed, double final_loss) {
  fs::create_directories(dir);
  std::ofstream(dir / "config.toml")
      << "[run]\nname = \"" << dir.filename().string() << "\"\nseed = " << seed
      << "\n[model]\npositional = \"" << positional << "\"\nd_model = 64\n";
  std::ofstream metrics(dir / "metrics.jsonl");
  metrics << "{\"step\":10,\"loss\":3.0,\"tokens_per_second\":1000,\"tokens\":1000}\n"
          << "{\"step\":20,\"loss\":2.5,\"tokens_per_second\":1200,\"tokens\":2000}\n"
          << "{\"step\":20,\"val_loss\":" << final_loss + 0.5 << ",\"val_bpb\":1.0}\n"
          << "{\"step\":40,\"loss\":2.0,\"tokens_per_second\":1400,\"tokens\":4000}\n"
          << "{\"step\":40,\"val_loss\":" << final_loss
          << ",\"val_bpb\":" << final_loss / std::log(2.0) << "}\n";
  std::ofstream(dir / "model_size.json") << "{\"parameters\": 12345, \"flops_per_token\": 8.5e4}\n";
}

}  // namespace

TEST_CASE("compare groups by configuration, pairs on seeds, writes tables and plots") {
  TempFolder temp;
  const double learned[] = {2.00, 2.10, 2.05}, rotary[] = {1.90, 1.97, 1.96};
  std::vector<fs::path> dirs;
  for (int s = 0; s < 3; ++s) {
    dirs.push_back(temp.path / ("learned" + std::to_string(s)));
    write_run(dirs.back(), "learned", s, learned[s]);
    dirs.push_back(temp.path / ("rotary" + std::to_string(s)));
    write_run(dirs.back(), "rotary", s, rotary[s]);
  }
  const std::vector<RunGroup> groups = group_runs(collect_runs(dirs));
  REQUIRE(groups.size() == 2);
  CHECK(groups[0].label == "model.positional=\"learned\"");
  CHECK(groups[0].runs.size() == 3);
  const CompareTable table = build_compare_table(groups, 0);
  const CompareRow& row = table.rows[1];
  CHECK(row.n == 3);
  CHECK(row.loss_mean == doctest::Approx((1.90 + 1.97 + 1.96) / 3));
  CHECK(row.delta == doctest::Approx((1.90 + 1.97 + 1.96 - 2.00 - 2.10 - 2.05) / 3));
  CHECK(row.test == "paired");
  // Differences -0.10, -0.13, -0.09: t = mean / (sd / sqrt 3), df 2, p = 1 - |t|/sqrt(2 + t^2).
  const double t = paired_t_test({1.90, 1.97, 1.96}, {2.00, 2.10, 2.05}).t;
  CHECK(row.p_value == doctest::Approx(1 - std::fabs(t) / std::sqrt(2 + t * t)).epsilon(1e-9));
  CHECK(row.tokens_per_second == doctest::Approx(1300));  // the first logged window left out
  CHECK(row.parameters == 12345);
  CHECK(groups[0].runs[0].val_curve.size() == 2);
  CHECK(to_markdown(table).find("**(baseline)**") != std::string::npos);
  CHECK(to_csv(table).find("paired") != std::string::npos);
  CHECK(to_json(table).find("\"p_value\"") != std::string::npos);

  const std::vector<fs::path> images = write_compare_plots(groups, table, temp.path / "plots");
  for (const fs::path& image : images) {
    INFO(image.string());
    CHECK(fs::exists(image));
    CHECK(fs::file_size(image) > 1000);
  }
}

TEST_CASE("scaling plot and fit file") {
  TempFolder temp;
  const ChinchillaLaw truth{1.8, 300.0, 900.0, 0.32, 0.29};
  std::vector<ScalingPoint> points;
  for (double n : {1e6, 1e7, 1e8})
    for (double d : {1e8, 1e9, 1e10}) points.push_back({n, d, truth.loss(n, d), ""});
  ScalingFit fit;
  fit.law = truth;
  for (const fs::path& image : write_scaling_plot(fit, points, temp.path)) {
    CHECK(fs::exists(image));
    CHECK(fs::file_size(image) > 1000);
  }
  std::ofstream(temp.path / "fit.json") << fit_to_json(fit, points);
  const ChinchillaLaw read = read_fit_json(temp.path / "fit.json");
  CHECK(read.A == doctest::Approx(300.0));
  CHECK(read.beta == doctest::Approx(0.29));
}
