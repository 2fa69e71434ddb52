// `patchbay schedule`: the text chart and landmark rates of a wsd schedule on the quickstart
// config, the CSV of every update's rate (values checked at the warmup end, the plateau and
// inside the 1-sqrt tail), the PNG written by gnuplot, and a bad schedule name refused as a
// config error (exit 3).
#include <doctest/doctest.h>

#include <sys/wait.h>
#include <unistd.h>

#include <array>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "../command_runner.hpp"

namespace {

using Result = patchbay::testing::CommandResult;

Result run(const std::string& arguments) { return patchbay::testing::run_patchbay(arguments); }

struct ScratchDir {  // removed when the test ends, also when it fails
  std::filesystem::path path = std::filesystem::temp_directory_path() /
                               ("patchbay_schedule_test_" + std::to_string(::getpid()));
  ScratchDir() { std::filesystem::create_directories(path); }
  ~ScratchDir() {
    std::error_code ignored;
    std::filesystem::remove_all(path, ignored);
  }
};

}  // namespace

TEST_CASE("schedule prints, writes the CSV and the PNG of a wsd schedule") {
  ScratchDir dir;
  const std::string csv = (dir.path / "lr.csv").string(), png = (dir.path / "lr.png").string();
  // quickstart: lr 5e-3, min_lr 5e-4, warmup 50, 800 updates; decay over 0.25 * 750 = 188.
  const Result r = run(std::string("schedule '") + PATCHBAY_CONFIGS +
                       "/quickstart.toml' --set train.schedule=wsd --set train.decay_fraction=0.25 --csv '" + csv +
                       "' --png '" + png + "'");
  INFO(r.output);
  REQUIRE(r.exit_code == 0);
  CHECK(r.output.find("wsd schedule: lr 0.005, min_lr 0.0005, warmup 50, 800 updates, decay 188 (1-sqrt)") !=
        std::string::npos);
  CHECK(r.output.find("*") != std::string::npos);
  std::ifstream in(csv);
  std::string line;
  std::getline(in, line);
  CHECK(line == "step,lr");
  std::vector<double> lr;
  while (std::getline(in, line)) lr.push_back(std::stod(line.substr(line.find(',') + 1)));
  REQUIRE(lr.size() == 800);
  CHECK(lr[0] == 0.0);                                     // update 1: warmup starts at 0
  CHECK(lr[50] == doctest::Approx(5e-3));                  // end of warmup
  CHECK(lr[611] == doctest::Approx(5e-3));                 // last plateau update (step 611 < 612)
  const double r_mid = 94.0 / 188.0;                       // step 706 = 612 + 94
  CHECK(lr[706] == doctest::Approx(5e-4 + 4.5e-3 * (1 - std::sqrt(r_mid))));
  CHECK(std::filesystem::file_size(png) > 1000);
}

TEST_CASE("schedule refuses an unknown schedule as a config error") {
  const Result r = run(std::string("schedule '") + PATCHBAY_CONFIGS + "/quickstart.toml' --set train.schedule=step");
  CHECK(r.exit_code == 3);
  CHECK(r.output.find("inverse_sqrt") != std::string::npos);
}
