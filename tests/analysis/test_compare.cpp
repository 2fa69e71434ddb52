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
#include "common/error.hpp"

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

namespace {

// A run whose attention kind has its own options table, as `patchbay train` stores it (only
// the chosen kind's table), with the plugin file a third-party kind came from.
void write_attention_run(const fs::path& dir, const std::string& kind, const std::string& table,
                         int seed, double final_loss) {
  fs::create_directories(dir);
  std::ofstream(dir / "config.toml")
      << "[run]\nseed = " << seed << "\nplugin_paths = ["
      << (kind == "mqa" ? "\"/opt/mqa/mqa.so\"" : "") << "]\n[model.attention]\nkind = \"" << kind
      << "\"\n[model.attention." << kind << "]\n"
      << table << "\n";
  std::ofstream(dir / "metrics.jsonl") << "{\"step\":40,\"val_loss\":" << final_loss << "}\n";
}

}  // namespace

TEST_CASE("compare labels rows by the keys that set them apart, not by what a kind implies") {
  TempFolder temp;
  std::vector<fs::path> dirs;
  auto add = [&](const std::string& name, const std::string& kind, const std::string& table,
                 double loss) {
    dirs.push_back(temp.path / name);
    write_attention_run(dirs.back(), kind, table, 0, loss);
  };
  add("dense", "dense", "causal = true", 2.0);
  add("mqa", "mqa", "kv_heads = 1", 2.1);
  add("sparse16", "sparse", "block_size = 16\nstride = 4", 2.2);
  add("sparse32", "sparse", "block_size = 32\nstride = 4", 2.3);
  const std::vector<RunGroup> groups = group_runs(collect_runs(dirs));
  REQUIRE(groups.size() == 4);
  CHECK(groups[0].label == "model.attention.kind=\"dense\"");
  CHECK(groups[1].label == "model.attention.kind=\"mqa\"");
  // An axis inside one kind's table still shows; the kind's constant keys do not.
  CHECK(groups[2].label == "model.attention.kind=\"sparse\", model.attention.sparse.block_size=16");
  CHECK(groups[3].label == "model.attention.kind=\"sparse\", model.attention.sparse.block_size=32");
  // The full difference names every key, the plugin file included.
  CHECK(groups[1].full_label.find("model.attention.mqa.kv_heads=1") != std::string::npos);
  CHECK(groups[1].full_label.find("model.attention.dense.causal=<unset>") != std::string::npos);
  CHECK(groups[1].full_label.find("run.plugin_paths=[\"/opt/mqa/mqa.so\"]") != std::string::npos);
  CHECK(groups[0].full_label.find("model.attention.sparse.stride=<unset>") != std::string::npos);

  // Two configurations told apart by their plugin file alone keep it in the label.
  const std::vector<RunGroup> files = group_runs(collect_runs(
      {dirs[1], [&] {
         const fs::path other = temp.path / "mqa_elsewhere";
         write_attention_run(other, "mqa", "kv_heads = 1", 0, 2.0);
         std::ofstream(other / "config.toml")
             << "[run]\nseed = 0\nplugin_paths = [\"/home/me/mqa.so\"]\n[model.attention]\nkind = "
                "\"mqa\"\n[model.attention.mqa]\nkv_heads = 1\n";
         return other;
       }()}));
  REQUIRE(files.size() == 2);
  CHECK(files[1].label == "run.plugin_paths=[\"/home/me/mqa.so\"]");
}

TEST_CASE("compare plots stay readable with a dozen configurations") {
  // Twelve kinds x two seeds: the images are written (look at them: PATCHBAY_KEEP_PLOTS=DIR
  // keeps a copy) with every configuration numbered as in the table.
  TempFolder temp;
  std::vector<fs::path> dirs;
  for (int k = 0; k < 12; ++k)
    for (int seed = 0; seed < 2; ++seed) {
      const std::string kind = "attention_kind_number_" + std::to_string(k);
      dirs.push_back(temp.path / (kind + "_" + std::to_string(seed)));
      fs::create_directories(dirs.back());
      std::ofstream(dirs.back() / "config.toml")
          << "[run]\nseed = " << seed << "\n[model]\npositional = \""
          << (k % 2 ? "rotary" : "learned") << "\"\n[model.attention]\nkind = \"" << kind
          << "\"\n[model.attention." << kind << "]\nwidth = " << k << "\n";
      std::ofstream metrics(dirs.back() / "metrics.jsonl");
      for (int step = 50; step <= 300; step += 50)
        metrics << "{\"step\":" << step
                << ",\"val_loss\":" << 2.0 + 1.5 * 50.0 / step + 0.02 * k + 0.01 * seed << "}\n";
    }
  const std::vector<RunGroup> groups = group_runs(collect_runs(dirs));
  REQUIRE(groups.size() == 12);
  CHECK(groups[3].label ==
        "model.attention.kind=\"attention_kind_number_3\", model.positional=\"rotary\"");
  const CompareTable table = build_compare_table(groups, 0);
  CHECK(to_markdown(table).find("| 11 | model.attention.kind=\"attention_kind_number_11\"") !=
        std::string::npos);
  const std::vector<fs::path> images = write_compare_plots(groups, table, temp.path / "plots");
  for (const fs::path& image : images) CHECK(fs::file_size(image) > 1000);
  const std::string script = [&] {
    std::ifstream in(temp.path / "plots" / "final_loss_bars.gp");
    return std::string(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
  }();
  CHECK(script.find("\"#11 attention.kind=attention_kind_number_11, positional=rotary\" 11") !=
        std::string::npos);
  if (const char* keep = std::getenv("PATCHBAY_KEEP_PLOTS"))
    fs::copy(temp.path / "plots", keep,
             fs::copy_options::recursive | fs::copy_options::overwrite_existing);
}

TEST_CASE("compare refuses a damaged sweep ledger or seed with errors naming the file") {
  TempFolder temp;
  const fs::path sweep = temp.path / "sweep";
  fs::create_directories(sweep);
  for (const std::string& ledger : {std::string("{not json"), std::string("{\"jobs\": 3}"),
                                    std::string("{\"jobs\": {\"0001\": 7}}")}) {
    INFO(ledger);
    std::ofstream(sweep / "ledger.json") << ledger;
    try {
      (void)collect_runs({sweep});
      FAIL("a damaged ledger was accepted");
    } catch (const patchbay::Error& e) {
      CHECK(std::string(e.what()).find("ledger.json") != std::string::npos);
    }
  }
  const fs::path run = temp.path / "run";
  write_run(run, "learned", 1, 2.0);
  std::ofstream(run / "config.toml") << "[run]\nname = \"run\"\nseed = \"abc\"\n";
  try {
    (void)collect_runs({run});
    FAIL("a seed that is not an integer was accepted");
  } catch (const patchbay::Error& e) {
    CHECK(std::string(e.what()).find("expected an integer seed") != std::string::npos);
  }
}
