// Sweep expansion known answers: grid order (last axis fastest), zipped lists,
// one-factor-at-a-time counts and contents, the seed axis, and clear errors for bad files.
#include <doctest/doctest.h>

#include "config/config_error.hpp"
#include "sweep/sweep_spec.hpp"

using namespace patchbay::sweep;

namespace {
std::vector<std::string> labels(const std::vector<JobSpec>& jobs) {
  std::vector<std::string> out;
  for (const JobSpec& job : jobs) out.push_back(job.label());
  return out;
}
SweepSpec parse(const std::string& text) {
  return parse_sweep_spec("base = \"b.toml\"\n" + text, "s.toml", "cfg");
}
}  // namespace

TEST_CASE("grid: Cartesian product, last axis fastest, values written as TOML") {
  const SweepSpec spec = parse(
      "[grid]\n\"train.lr\" = [0.001, 0.01]\n\"model.positional\" = [\"learned\", \"rotary\", "
      "\"none\"]\n");
  CHECK(spec.base_config == std::filesystem::path("cfg/b.toml"));
  CHECK(spec.name == "s");
  const auto jobs = expand_jobs(spec);
  REQUIRE(jobs.size() == 6);
  CHECK(labels(jobs) == std::vector<std::string>{"train.lr=0.001, model.positional=\"learned\"",
                                                 "train.lr=0.001, model.positional=\"rotary\"",
                                                 "train.lr=0.001, model.positional=\"none\"",
                                                 "train.lr=0.01, model.positional=\"learned\"",
                                                 "train.lr=0.01, model.positional=\"rotary\"",
                                                 "train.lr=0.01, model.positional=\"none\""});
  CHECK(jobs[5].index == 5);
  CHECK_FALSE(jobs[0].has_seed);
}

TEST_CASE("zip steps lists together; a grid times a zip; inline tables for component swaps") {
  const SweepSpec spec = parse(
      "set = [\"train.max_steps=5\"]\n[grid]\n\"a.x\" = [1, 2]\n[zip]\n\"m.d\" = [32, 64]\n\"m.h\" "
      "= [2, 4]\n");
  const auto jobs = expand_jobs(spec);
  CHECK(labels(jobs) == std::vector<std::string>{"a.x=1, m.d=32, m.h=2", "a.x=1, m.d=64, m.h=4",
                                                 "a.x=2, m.d=32, m.h=2", "a.x=2, m.d=64, m.h=4"});
  CHECK(jobs[1].all_overrides ==
        std::vector<std::string>{"train.max_steps=5", "a.x=1", "m.d=64", "m.h=4"});
  const auto swap = expand_jobs(
      parse("[grid]\noptimizer = [{kind = \"sgd\", momentum = 0.9}, {kind = \"adamw\"}]\n"));
  CHECK(swap[0].label() == "optimizer={ kind = \"sgd\", momentum = 0.9 }");
  CHECK(swap[1].label() == "optimizer={ kind = \"adamw\" }");
  CHECK_THROWS_AS(parse("[zip]\n\"m.d\" = [32, 64]\n\"m.h\" = [2]\n"),
                  patchbay::config::ConfigError);
}

TEST_CASE("one factor at a time: the baseline plus one change per run") {
  const SweepSpec spec =
      parse("[ofat]\n\"opt.lr\" = [0.1, 0.01]\n\"opt.beta\" = [0.9, 0.99, 0.999]\n");
  const auto jobs = expand_jobs(spec);
  REQUIRE(jobs.size() == 4);  // 1 + (2-1) + (3-1), not the 6 of the grid
  CHECK(labels(jobs) ==
        std::vector<std::string>{"opt.lr=0.1, opt.beta=0.9", "opt.lr=0.01, opt.beta=0.9",
                                 "opt.lr=0.1, opt.beta=0.99", "opt.lr=0.1, opt.beta=0.999"});
}

TEST_CASE("seeds are the innermost axis and go to seed_key") {
  const SweepSpec spec =
      parse("seeds = [3, 4]\nseed_key = \"model.seed\"\n[grid]\n\"a.x\" = [1, 2]\n");
  const auto jobs = expand_jobs(spec);
  REQUIRE(jobs.size() == 4);
  CHECK(jobs[0].seed == 3);
  CHECK(jobs[1].seed == 4);
  CHECK(jobs[1].label() == "a.x=1");
  CHECK(jobs[2].all_overrides == std::vector<std::string>{"a.x=2", "model.seed=3"});
  CHECK(expand_jobs(parse("seeds = [0, 1, 2]\n")).size() == 3);
  CHECK(expand_jobs(parse("")).size() == 1);
}

TEST_CASE("bad sweep files are refused with the key and a fix") {
  CHECK_THROWS_WITH_AS(parse("[gird]\n\"a\" = [1]\n"), doctest::Contains("unknown key"),
                       patchbay::config::ConfigError);
  CHECK_THROWS_WITH_AS(parse("[grid]\n\"a\" = 1\n"), doctest::Contains("non-empty list"),
                       patchbay::config::ConfigError);
  CHECK_THROWS_WITH_AS(parse_sweep_spec("name = \"x\"\n", "s.toml", "."), doctest::Contains("base"),
                       patchbay::config::ConfigError);
}
