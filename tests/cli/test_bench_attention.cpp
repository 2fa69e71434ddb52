// `patchbay bench attention` as a user meets it: the same-run GEMM reference line, and each
// kind's counted FLOPs with its rate and share of that reference (the formulas themselves are
// checked in test_attention_flop_count.cpp), and --precision f32,bf16 (bf16 autocast rows).
#include <doctest/doctest.h>

#include <sstream>
#include <string>
#include <vector>

#include "../command_runner.hpp"

using patchbay::testing::run_patchbay;

namespace {

// The whitespace-separated fields of the first line that starts with `prefix`.
std::vector<std::string> fields_of_line(const std::string& text, const std::string& prefix) {
  std::istringstream lines(text);
  std::string line;
  while (std::getline(lines, line))
    if (line.rfind(prefix, 0) == 0) {
      std::istringstream in(line);
      std::vector<std::string> out;
      for (std::string f; in >> f;) out.push_back(f);
      return out;
    }
  return {};
}

}  // namespace

TEST_CASE("bench attention prints counted FLOPs and the share of a same-run GEMM") {
  const auto r = run_patchbay("bench attention --seq-lens 64 --kinds dense,linear,performer",
                              "OMP_NUM_THREADS=1");
  INFO(r.output);
  REQUIRE(r.exit_code == 0);
  CHECK(r.output.find("GFLOP/s  of GEMM") != std::string::npos);
  CHECK(r.output.find("reference at T = 64: oneDNN f32 GEMM [1024 x 1024] x [1024 x 1024]") !=
        std::string::npos);
  // dense at T 64 (B 1, H 4, D 64): 3 x (2*64*256*768 + 2*64*256*256 + 4*4*64*(64*65/2))
  // = 0.107 GFLOP.
  const std::vector<std::string> dense = fields_of_line(r.output, "dense ");
  REQUIRE(dense.size() == 8);
  CHECK(dense[1] == "64");
  CHECK(dense[5] == "0.107");
  CHECK(dense[7].back() == '%');
  for (const char* kind : {"linear ", "performer "}) {
    const std::vector<std::string> row = fields_of_line(r.output, kind);
    REQUIRE(row.size() == 8);
    CHECK(std::stod(row[5]) > 0);  // GFLOP
    CHECK(std::stod(row[6]) > 0);  // GFLOP/s
    CHECK(row[7].back() == '%');
  }
}

TEST_CASE("bench attention --warmup: 0 times the first pass, a negative count is refused") {
  const auto none =
      run_patchbay("bench attention --seq-lens 32 --kinds dense --warmup 0", "OMP_NUM_THREADS=1");
  INFO(none.output);
  CHECK(none.exit_code == 0);
  CHECK(fields_of_line(none.output, "dense ").size() == 8);
  const auto negative = run_patchbay("bench attention --seq-lens 32 --kinds dense --warmup -1");
  INFO(negative.output);
  CHECK(negative.exit_code != 0);
  CHECK(negative.output.find("--warmup >= 0") != std::string::npos);
}

TEST_CASE("bench attention --precision f32,bf16: KIND/bf16 rows against dense/bf16") {
  const auto r = run_patchbay(
      "bench attention --seq-lens 64 --kinds dense,linear,lsh --precision f32,bf16 --repeats 1",
      "OMP_NUM_THREADS=1");
  INFO(r.output);
  REQUIRE(r.exit_code == 0);
  for (const char* row :
       {"dense ", "dense/bf16 ", "linear ", "linear/bf16 ", "lsh ", "lsh/bf16 "}) {
    CAPTURE(row);
    const std::vector<std::string> fields = fields_of_line(r.output, row);
    REQUIRE(fields.size() == 8);
    CHECK(fields[1] == "64");
    CHECK(std::stod(fields[2]) > 0);  // seconds
  }
  // Each precision's kinds are compared with dense of that precision; dense/bf16 with nothing.
  CHECK(fields_of_line(r.output, "dense/bf16 ")[4] == "-");
  CHECK(fields_of_line(r.output, "linear/bf16 ")[4].back() == 'x');
  // The counted FLOPs do not depend on the precision.
  CHECK(fields_of_line(r.output, "linear/bf16 ")[5] == fields_of_line(r.output, "linear ")[5]);
  const auto bad = run_patchbay("bench attention --seq-lens 32 --kinds dense --precision fp8");
  INFO(bad.output);
  CHECK(bad.exit_code != 0);
  CHECK(bad.output.find("--precision expects f32, bf16 or f32,bf16") != std::string::npos);
}
