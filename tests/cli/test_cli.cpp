// Runs the `patchbay` executable as a user would: help texts, unknown commands with
// suggestions, exit codes, and `config check` / `config show` on good and bad files.
#include <doctest/doctest.h>

#include <sys/wait.h>

#include <array>
#include <cmath>
#include <cstdio>
#include <string>

#include "../command_runner.hpp"

namespace {

using Result = patchbay::testing::CommandResult;
using patchbay::testing::run_patchbay;

std::string fixture(const std::string& name) { return std::string("'") + PATCHBAY_CLI_FIXTURES + "/" + name + "'"; }

bool contains(const std::string& text, const std::string& part) { return text.find(part) != std::string::npos; }

}  // namespace

TEST_CASE("--help lists every command by group and the exit codes") {
  const Result result = run_patchbay("--help");
  CHECK(result.exit_code == 0);
  CHECK(contains(result.output, "Usage: patchbay [global options] <command>"));
  CHECK(contains(result.output, "\n  config\n"));
  CHECK(contains(result.output, "config check"));
  CHECK(contains(result.output, "config show"));
  CHECK(contains(result.output, "--plugin-path PATH  a plugin file (NAME.so) or a folder of them"));
  CHECK(contains(result.output, "Exit codes:"));
  CHECK(contains(result.output, "3  the config is invalid"));
}

TEST_CASE("a group's --help lists its commands") {
  const Result result = run_patchbay("config --help");
  CHECK(result.exit_code == 0);
  CHECK(contains(result.output, "config check"));
  CHECK(contains(result.output, "config show"));
  CHECK_FALSE(contains(result.output, "Exit codes"));
}

TEST_CASE("a command answers --help itself") {
  const Result result = run_patchbay("config show --help");
  CHECK(result.exit_code == 0);
  CHECK(contains(result.output, "Usage: patchbay config show FILE"));
  CHECK(contains(result.output, "--set"));
}

TEST_CASE("an unknown command suggests the closest ones and exits 2") {
  const Result typo_group = run_patchbay("conifg check x.toml");
  CHECK(typo_group.exit_code == 2);
  CHECK(contains(typo_group.output, "unknown command 'conifg'"));
  CHECK(contains(typo_group.output, "did you mean 'config'?"));

  const Result typo_command = run_patchbay("config chekc x.toml");
  CHECK(typo_command.exit_code == 2);
  CHECK(contains(typo_command.output, "did you mean 'config check'"));  // nearest first
  CHECK_FALSE(contains(typo_command.output, "terminate"));  // no crash, no stack trace
}

TEST_CASE("bad global options and command options exit 2") {
  CHECK(run_patchbay("--frobnicate config check x").exit_code == 2);
  const Result level = run_patchbay("--log-level loud --help");
  CHECK(level.exit_code == 2);
  CHECK(contains(level.output, "unknown log level 'loud'"));
  const Result option = run_patchbay("config check --no-such-option " + fixture("host_only_valid.toml"));
  CHECK(option.exit_code == 2);
  CHECK(contains(option.output, "no-such-option"));
  CHECK(run_patchbay("config check").exit_code == 2);  // FILE missing
  CHECK(contains(run_patchbay("--version").output, "patchbay "));
}

TEST_CASE("config check: a valid file exits 0, a bad one exits 3 with every error") {
  const Result valid = run_patchbay("config check " + fixture("host_only_valid.toml"));
  CHECK_MESSAGE(valid.exit_code == 0, valid.output);
  CHECK(contains(valid.output, "valid"));

  const Result bad = run_patchbay("config check " + fixture("host_only_bad.toml"));
  CHECK(bad.exit_code == 3);
  CHECK(contains(bad.output, "2 errors in the config"));
  CHECK(contains(bad.output, "host_only_bad.toml:3: run.seeed: unknown key"));
  CHECK(contains(bad.output, "did you mean 'seed'?"));
  CHECK(contains(bad.output, "host_only_bad.toml:6: data.validation_fraction: wrong type"));
  CHECK(contains(bad.output, "found:    string \"lots\""));

  const Result fixed = run_patchbay("config check " + fixture("host_only_bad.toml") +
                                    " --set run.seeed=1 --set data.validation_fraction=0.2");
  CHECK(fixed.exit_code == 3);  // --set adds keys; the typo is still in the file
  CHECK_FALSE(contains(fixed.output, "validation_fraction"));
  CHECK(contains(fixed.output, "run.seeed: unknown key"));

  const Result missing = run_patchbay("config check " + fixture("no_such_file.toml"));
  CHECK(missing.exit_code == 3);
  CHECK(contains(missing.output, "config file not found"));
}

TEST_CASE("[[data.sources]] is checked by the schema, and config check and train agree") {
  const Result bad = run_patchbay("config check " + fixture("sources_bad.toml"));
  CHECK(bad.exit_code == 3);
  CHECK(contains(bad.output, "data.sources[0].weigth: unknown key"));
  CHECK(contains(bad.output, "did you mean 'weight'?"));
  CHECK(contains(bad.output, "data.sources[1].weight: wrong type"));
  const Result train = run_patchbay("train " + fixture("sources_bad.toml"));
  CHECK(train.exit_code == 3);
  CHECK(contains(train.output, "data.sources[0].weigth: unknown key"));
  CHECK(contains(train.output, "data.sources[1].weight: wrong type"));

  const Result zero = run_patchbay("config check " + fixture("sources_zero_weight.toml"));
  CHECK(zero.exit_code != 0);
  CHECK(contains(zero.output, "data.sources[0].weight is 0"));
  const Result zero_train = run_patchbay("train " + fixture("sources_zero_weight.toml"));
  CHECK(zero_train.exit_code == zero.exit_code);
  CHECK(contains(zero_train.output, "data.sources[0].weight is 0"));
}

TEST_CASE("config show prints the resolved config with defaults and sources") {
  const Result shown = run_patchbay("config show " + fixture("host_only_valid.toml") + " --sources --set run.seed=9");
  CHECK_MESSAGE(shown.exit_code == 0, shown.output);
  CHECK(contains(shown.output, "name = \"cli_test\"  # "));
  CHECK(contains(shown.output, "host_only_valid.toml:3"));
  CHECK(contains(shown.output, "seed = 9  # <command line --set run.seed=9>"));
  CHECK(contains(shown.output, "output_dir = \"runs\"  # <schema default>"));
  CHECK(contains(shown.output, "validation_fraction = 0.05"));

  const Result raw = run_patchbay("config show --raw " + fixture("host_only_bad.toml"));
  CHECK(raw.exit_code == 0);  // --raw neither validates nor adds defaults
  CHECK(contains(raw.output, "seeed = 3"));
  CHECK_FALSE(contains(raw.output, "output_dir"));

  const Result invalid = run_patchbay("config show " + fixture("host_only_bad.toml"));
  CHECK(invalid.exit_code == 3);
  CHECK(contains(invalid.output, "run.seeed: unknown key"));
}

TEST_CASE("component keys are checked against the plugin's own schema") {
  const Result typo = run_patchbay("config check " + fixture("char_typo.toml"));
  CHECK(typo.exit_code == 3);
  CHECK(contains(typo.output, "char_typo.toml:4: tokenizer.special_tokenz: unknown key"));
  CHECK(contains(typo.output, "(tokenizer 'char')"));
  CHECK(contains(typo.output, "did you mean 'special_tokens'?"));

  const Result unknown = run_patchbay("config check " + fixture("char_unknown_kind.toml"));
  CHECK(unknown.exit_code == 3);
  CHECK(contains(unknown.output, "unknown tokenizer component 'chr'"));
  // The fix line is one sentence whichever way it starts.
  CHECK(contains(unknown.output,
                 "fix:      did you mean 'char'? fix the name, or add the plugin providing it to the "
                 "plugin path (--plugin-path or run.plugin_paths)"));
  const Result far = run_patchbay("config check " + fixture("char_unknown_kind.toml") +
                                  " --set 'tokenizer.kind=\"wordpiece\"'");
  CHECK(far.exit_code == 3);
  CHECK(contains(far.output, "unknown tokenizer component 'wordpiece'"));
  CHECK(contains(far.output,
                 "fix:      fix the name, or add the plugin providing it to the plugin path "
                 "(--plugin-path or run.plugin_paths)"));
  CHECK_FALSE(contains(far.output, "fix:      or "));

  const Result demo = run_patchbay(std::string("config check '") + PATCHBAY_CONFIGS + "/tokenizer_demo.toml'");
  CHECK_MESSAGE(demo.exit_code == 0, demo.output);
  const Result demo_bad = run_patchbay(std::string("config check '") + PATCHBAY_CONFIGS +
                                       "/tokenizer_demo.toml' --set tokenizer.vocab_size=10");
  CHECK(demo_bad.exit_code == 3);
  CHECK(contains(demo_bad.output, "tokenizer.vocab_size: value out of range"));
  CHECK(contains(demo_bad.output, "<command line --set tokenizer.vocab_size=10>"));
}

namespace {
// One timed update of the quickstart shape at 2 x 16 random tokens, in `precision`, with any
// `extra` options.
Result bench_train_quickstart(const std::string& precision, const std::string& extra = "") {
  return run_patchbay(
      std::string("bench train '") + PATCHBAY_CONFIGS +
      "/quickstart.toml' --batch-size 2 --seq-len 16 --random-tokens --vocab-size 330 --steps 1 "
      "--precision " + precision + " " + extra + " 2>&1");
}

// The MFU percentage printed after `label` in `output` (", MFU 42.0%"); fails the test when
// the line is missing.
double mfu_after(const std::string& output, const std::string& label) {
  const size_t at = output.find(label);
  REQUIRE(at != std::string::npos);
  const size_t mfu = output.find(", MFU ", at);
  REQUIRE(mfu != std::string::npos);
  return std::stod(output.substr(mfu + 6));
}
}  // namespace

TEST_CASE("bench train prints tokens/s, MFU and the step's ceiling at the run's batch") {
  const Result r = bench_train_quickstart("f32");
  INFO(r.output);
  REQUIRE(r.exit_code == 0);
  CHECK(contains(r.output, "tokens/s: "));
  CHECK(contains(r.output, "MFU vs that GEMM rate: "));
  const double percent = mfu_after(r.output, "ceiling at 32 tokens per update: ");
  CHECK(percent > 0.0);
  CHECK(percent <= 100.0);
#if defined(__x86_64__)
  // Every x86-64 CPU we build for has AVX2 + FMA at least, so the machine's peak is measured,
  // and the reference GEMM's share of it is the two printed rates' ratio.
  const size_t peak_at = r.output.find("machine peak: ");
  REQUIRE(peak_at != std::string::npos);
  const size_t ref_at = r.output.find("f32 output: ");
  REQUIRE(ref_at != std::string::npos);
  const double reference = std::stod(r.output.substr(ref_at + 12));
  const size_t rate_at = r.output.find(" threads, ", peak_at);
  const size_t share_at = r.output.find("the reference GEMM at ", peak_at);
  REQUIRE(rate_at != std::string::npos);
  REQUIRE(share_at != std::string::npos);
  const double peak = std::stod(r.output.substr(rate_at + 10));
  CHECK(peak > 0.0);
  // Printed to 0.1 percentage point (and the two rates to 0.01 GFLOP/s): on a loaded machine
  // a tiny reference GEMM can be well under 1% of the peak, so the tolerance is absolute.
  const double expected_share = 100.0 * reference / peak;
  CHECK(std::abs(std::stod(r.output.substr(share_at + 22)) - expected_share) <=
        0.05 + 1e-3 * expected_share);
#endif
}

TEST_CASE("bench train f32,bf16 takes its reference rates from interleaved rounds") {
  const Result r = bench_train_quickstart("f32,bf16");
  INFO(r.output);
  REQUIRE(r.exit_code == 0);
  CHECK(contains(r.output, "oneDNN f32 GEMM"));
  CHECK(contains(r.output, "oneDNN bf16 GEMM"));
  CHECK(contains(r.output, "median of 3 rounds"));
  CHECK(contains(r.output, "medians of 3 interleaved f32/bf16 rounds"));
  CHECK(contains(r.output, "% of the target)"));
  // The target as a budget: f32's and bf16's time beyond the bound and what the target leaves.
  const std::string label = "measured), ms per update: f32 ";
  const size_t at = r.output.find(label);
  REQUIRE(at != std::string::npos);
  const double f32_over = std::stod(r.output.substr(at + label.size()));
  const size_t bf16_at = r.output.find(", bf16 ", at);
  const size_t left_at = r.output.find("the target leaves bf16 ", at);
  REQUIRE(bf16_at != std::string::npos);
  REQUIRE(left_at != std::string::npos);
  const double bf16_over = std::stod(r.output.substr(bf16_at + 7));
  const double left = std::stod(r.output.substr(left_at + 23));
  // Any of the three may be negative: the reference rates are measured after the updates, and
  // on a loaded machine (ctest running other tests beside this one) they can come out slower
  // than the updates' own GEMMs. What must hold is that bf16's overhead minus the budget is
  // bf16's update time minus the target's: 32 tokens at the printed bf16 rate against 32 at
  // the target rate.
  CHECK(std::isfinite(f32_over));
  CHECK(std::isfinite(bf16_over));
  const size_t rates_at = r.output.find("tokens/s: f32 ");
  const size_t target_at = r.output.find(" tokens/s (", r.output.find("target: 0.85 x "));
  REQUIRE(rates_at != std::string::npos);
  REQUIRE(target_at != std::string::npos);
  const double bf16_rate = std::stod(r.output.substr(r.output.find(", bf16 ", rates_at) + 7));
  const double target = std::stod(r.output.substr(r.output.rfind("= ", target_at) + 2));
  const double expected = 32.0 * (1.0 / bf16_rate - 1.0 / target) * 1e3;
  // Tolerance: 2%, plus what printing the two rates to 0.1 tokens/s can move `expected` by
  // (it matters on a loaded machine, where the rates are tens of tokens/s, not thousands).
  const double rounding = 32.0e3 * 0.05 * (1.0 / (bf16_rate * bf16_rate) + 1.0 / (target * target));
  CHECK(std::abs(bf16_over - left - expected) <= 0.02 * std::abs(expected) + rounding);
}

TEST_CASE("bench train --gemm-breakdown lists the timed updates' GEMMs by shape") {
  const Result r = bench_train_quickstart("f32", "--gemm-breakdown");
  INFO(r.output);
  REQUIRE(r.exit_code == 0);
  CHECK(contains(r.output, "GEMMs of the timed updates, by shape"));
  CHECK(contains(r.output, "f32 [32 x 128] x [128 x 330]^T"));  // the tied LM head
  CHECK(contains(r.output, "all f32 GEMMs"));
  CHECK(contains(r.output, "of the step's time"));
  // A bound: the quickstart's small GEMMs run below the reference rate, so about 100% at
  // most. The reference and the step's GEMMs are timed at different moments, and on a loaded
  // machine (ctest -j2 beside other work) that read 109-110% twice, so the bound is 130%.
  const double percent =
      mfu_after(r.output, "ceiling with the GEMMs as measured (other FLOPs at the reference rate");
  CHECK(percent > 0.0);
  CHECK(percent <= 130.0);
}

TEST_CASE("bench generate prints each row's interleaved rounds and token-paired figures") {
  const Result r = run_patchbay(std::string("bench generate '") + PATCHBAY_CONFIGS +
                                "/quickstart.toml' --vocab-size 330 --new-tokens 4 "
                                "--warmup-tokens 1 --bandwidth-mib 1 --weights-dtype f32,bf16 2>&1");
  INFO(r.output);
  REQUIRE(r.exit_code == 0);
  size_t rows = 0;
  for (size_t at = r.output.find("5 rounds of read then decode: "); at != std::string::npos;
       at = r.output.find("5 rounds of read then decode: ", at + 1)) {
    const double percent = std::stod(r.output.substr(at + 30));
    CHECK(percent > 0.0);
    ++rows;
  }
  CHECK(rows == 2);  // f32 and bf16 weights
  CHECK(contains(r.output, "interleaved rounds (each decode against the read measured just before it)"));
  // The token-paired pass per row: a positive ratio, and where the model time went.
  size_t paired = 0;
  for (size_t at = r.output.find("token-paired: "); at != std::string::npos;
       at = r.output.find("token-paired: ", at + 1)) {
    CHECK(std::stod(r.output.substr(at + 14)) > 0.0);
    ++paired;
  }
  CHECK(paired == 2);
  CHECK(contains(r.output, "% of the paired read, "));
  CHECK(contains(r.output, "token-paired (each token's decode against a read of its bytes"));
}

TEST_CASE("bench ops attention prints f32 (and, with AVX512-BF16, bf16) engine rows and naive") {
  const Result r = run_patchbay("bench ops --parts attention --seq-len 128 --heads 2 2>&1");
  INFO(r.output);
  REQUIRE(r.exit_code == 0);
  CHECK(contains(r.output, "bf16 fwd"));
  const size_t row = r.output.find("\n     128 |");
  REQUIRE(row != std::string::npos);
  const std::string line = r.output.substr(row + 1, r.output.find('\n', row + 1) - row - 1);
  // T | f32 fwd bwd MiB | bf16 fwd bwd MiB (or "-" without AVX512-BF16) | naive fwd bwd MiB
  int bars = 0;
  for (const char c : line) bars += c == '|';
  CHECK(bars == 3);
  CHECK(line.find("skipped") == std::string::npos);
}
