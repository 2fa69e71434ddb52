// Input the probe of issue 39 found mishandled, through the CLI: an integer too large for 64
// bits in --set, a run name that cannot be a folder, plugin path entries that do not exist or
// cannot be read (a warning naming them, not silence).
#include <doctest/doctest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <string>

#include "../command_runner.hpp"
#include "patchbay/testing/temp_dir.hpp"

namespace fs = std::filesystem;
using patchbay::testing::CommandResult;
using patchbay::testing::run_patchbay;

namespace {

bool contains(const std::string& text, const std::string& part) {
  return text.find(part) != std::string::npos;
}

std::string fixture(const std::string& name) {
  return std::string("'") + PATCHBAY_CLI_FIXTURES + "/" + name + "'";
}

}  // namespace

TEST_CASE("--set with an integer beyond 64 bits says so, not 'remove the quotes'") {
  const CommandResult r = run_patchbay("config check " + fixture("host_only_valid.toml") +
                                       " --set train.max_steps=99999999999999999999");
  CHECK(r.exit_code == 3);
  CHECK(contains(r.output, "integer out of range"));
  CHECK(contains(r.output, "train.max_steps"));
  CHECK_FALSE(contains(r.output, "remove the quotes"));
}

TEST_CASE("a run name that cannot be a folder is refused by the schema") {
  const patchbay::testing::TempDir scratch("cli_run_name");
  for (const std::string& name :
       {std::string(10 << 20, 'x'), std::string(300, 'y'), std::string("a/b")}) {
    INFO("name of " << name.size() << " bytes");
    std::ofstream(scratch / "long.toml")
        << "[run]\nname = \"" << name << "\"\n[data]\ncorpus = \"kjv\"\n";
    const CommandResult r = run_patchbay("config check '" + (scratch / "long.toml").string() + "'");
    CHECK(r.exit_code == 3);
    CHECK(contains(r.output, "run.name"));
    CHECK((contains(r.output, "not a usable folder name") || contains(r.output, "value too long")));
    CHECK_FALSE(contains(r.output, "internal"));
    CHECK(r.output.size() < 20000);  // the value is not echoed back whole
  }
}

TEST_CASE("a --plugin-path entry that does not exist is warned about, naming it") {
  const CommandResult r = run_patchbay("--plugin-path /nonexistent/patchbay-plugins plugins list");
  CHECK(r.exit_code == 0);
  CHECK(contains(r.output, "plugin path entry '/nonexistent/patchbay-plugins' does not exist"));
}

TEST_CASE("a plugin folder that cannot be read is warned about, naming it") {
  const patchbay::testing::TempDir scratch("cli_locked");
  ::chmod(scratch.path().c_str(), 0755);
  const fs::path locked = scratch / "locked";
  fs::create_directories(locked);
  std::ofstream(locked / "a.so") << "x";
  ::chmod(locked.c_str(), 0);
  // root reads every folder: run the command as nobody then (setpriv, util-linux).
  const std::string as_user =
      ::geteuid() == 0 ? "setpriv --reuid=65534 --regid=65534 --clear-groups " : "";
  const CommandResult r =
      patchbay::testing::run_shell(as_user + "env -u PATCHBAY_PLUGIN_PATH '" + PATCHBAY_EXECUTABLE +
                                   "' --plugin-path '" + locked.string() + "' plugins list 2>&1");
  ::chmod(locked.c_str(), 0755);
  CHECK(contains(r.output, "cannot read plugin folder '" + locked.string() + "'"));
}

TEST_CASE("config check refuses what train would refuse before its first step") {
  const patchbay::testing::TempDir scratch("cli_preflight");
  const std::string base =
      "[run]\nname = \"preflight\"\n[data]\ncorpus = \"kjv\"\n[tokenizer]\nkind = \"char\"\n"
      "[model]\ncontext_length = 32\nn_layers = 1\nn_heads = 2\nd_model = 32\n"
      "[train]\nseq_len = 16\nmax_steps = 10\nwarmup_steps = 2\n";
  std::ofstream(scratch / "good.toml") << base;
  const std::string good = "config check '" + (scratch / "good.toml").string() + "'";
  const CommandResult valid = run_patchbay(good);
  CHECK_MESSAGE(valid.exit_code == 0, valid.output);
  struct Case {
    const char* set;
    const char* expected;
  };
  const Case cases[] = {
      {"model.n_heads=3", "heads do not divide d_model"},
      {"train.seq_len=64", "exceeds model.context_length"},
      {"train.warmup_steps=20", "train.warmup_steps"},
      {"optimizer={kind=\"sgd\", nesterov=true}", "nesterov"},
  };
  for (const Case& c : cases) {
    INFO(c.set);
    const CommandResult r = run_patchbay(good + " --set '" + c.set + "'");
    CHECK(r.exit_code == 3);
    CHECK(contains(r.output, c.expected));
  }
}

TEST_CASE("bench attention --set with a value that is not a number names the setting") {
  for (const std::string& value : {std::string("abc"), std::string("99999999999999999999")}) {
    const CommandResult r =
        run_patchbay("bench attention --seq-lens 16 --kinds dense,lsh --set lsh.n_hashes=" + value);
    INFO(r.output);
    // The bench reports a kind it cannot make in that kind's row and goes on with the others.
    CHECK(contains(r.output, "lsh              16  failed: --set n_hashes=" + value));
    CHECK(contains(r.output, "'n_hashes' is an integer setting"));
    CHECK_FALSE(contains(r.output, "internal"));
  }
}
