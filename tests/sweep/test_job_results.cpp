// sweep::final_evaluation (core/sweep/job_results.hpp) on hand-written metrics.jsonl files:
// the last evaluation's fields, and the training speed as `patchbay compare` reads it (the mean
// of tokens_per_second over the training records after the first), shown in the summary.
#include <doctest/doctest.h>

#include <fstream>
#include <string>

#include "patchbay/testing/temp_dir.hpp"
#include "sweep/job_results.hpp"

namespace {

void write_metrics(const std::filesystem::path& dir, const std::string& lines) {
  std::ofstream(dir / "metrics.jsonl") << lines;
}

}  // namespace

TEST_CASE("a sweep job's final record carries its tokens/s beside its losses") {
  patchbay::testing::TempDir dir("job_results");
  write_metrics(dir.path(),
                "{\"step\": 5, \"loss\": 3.0, \"tokens_per_second\": 100, \"tokens\": 500}\n"
                "{\"step\": 10, \"loss\": 2.8, \"tokens_per_second\": 200, \"tokens\": 1000}\n"
                "{\"step\": 10, \"val_loss\": 2.9, \"val_bpb\": 4.1}\n"
                "{\"step\": 15, \"loss\": 2.6, \"tokens_per_second\": 400, \"tokens\": 1500}\n"
                "{\"step\": 15, \"val_loss\": 2.7, \"val_bpb\": 3.9}\n");
  const nlohmann::json final = patchbay::sweep::final_evaluation(dir.path());
  CHECK(final["step"] == 15);
  CHECK(final["val_loss"].get<double>() == doctest::Approx(2.7));
  // (200 + 400) / 2: the first window (warm-up) is left out.
  CHECK(final["tokens_per_second"].get<double>() == doctest::Approx(300.0));
  CHECK_FALSE(final.contains("loss"));
  const std::string summary = patchbay::sweep::final_evaluation_summary(final);
  CHECK(summary.find("tokens/s 300") != std::string::npos);
  CHECK(summary.find("val_loss 2.7000") != std::string::npos);
}

TEST_CASE("one training record gives no speed; no evaluation gives an empty record") {
  patchbay::testing::TempDir dir("job_results_short");
  write_metrics(dir.path(),
                "{\"step\": 5, \"loss\": 3.0, \"tokens_per_second\": 100, \"tokens\": 500}\n"
                "{\"step\": 5, \"val_loss\": 2.9}\n");
  const nlohmann::json final = patchbay::sweep::final_evaluation(dir.path());
  CHECK(final.contains("val_loss"));
  CHECK_FALSE(final.contains("tokens_per_second"));
  write_metrics(dir.path(),
                "{\"step\": 5, \"loss\": 3.0, \"tokens_per_second\": 100}\n"
                "{\"step\": 6, \"loss\": 3.0, \"tokens_per_second\": 100}\n");
  CHECK(patchbay::sweep::final_evaluation(dir.path()).empty());
}
