// End to end through the `patchbay` executable: the quickstart trains with
// `--set optimizer.kind=sgd` (a few steps of a tiny model on a tiny corpus in a temporary
// folder), the run stores a config holding only the optimizer it used, and `config show`
// prints the unused options tables marked as ignored.
#include <doctest/doctest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <array>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

#include "patchbay/testing/temp_dir.hpp"

#include "../command_runner.hpp"

namespace fs = std::filesystem;

namespace {

using Result = patchbay::testing::CommandResult;
using patchbay::testing::run_patchbay;

bool contains(const std::string& text, const std::string& part) {
  return text.find(part) != std::string::npos;
}

// A scratch folder of its own, removed when the test ends (also when it fails).
struct TempFolder {
  patchbay::testing::TempDir dir{"config_swap_e2e"};
  const fs::path& path = dir.path();
};

std::string read(const fs::path& file) {
  std::ifstream in(file);
  std::ostringstream text;
  text << in.rdbuf();
  return text.str();
}

}  // namespace

TEST_CASE(
    "patchbay train configs/quickstart.toml --set optimizer.kind=sgd runs and stores what it "
    "used") {
  TempFolder folder;
  {
    std::ofstream corpus(folder.path / "corpus.txt");
    for (int i = 0; i < 400; ++i)
      corpus << "and god said let there be light, and there was light " << i << ".\n";
  }
  const std::string quickstart = std::string("'") + PATCHBAY_CONFIGS + "/quickstart.toml'";
  const std::string tiny =
      " --set data.corpus='\"" + (folder.path / "corpus.txt").string() + "\"'" +
      " --set data.output_dir='\"" + (folder.path / "data").string() + "\"'" +
      " --set train.out_dir='\"" + (folder.path / "run").string() + "\"'" +
      " --set train.max_steps=3 --set train.warmup_steps=1 --set train.batch_size=2"
      " --set train.seq_len=16 --set train.eval_batches=1 --set train.sample_tokens=0"
      " --set model.n_layers=1 --set model.d_model=16 --set model.n_heads=2"
      " --set model.context_length=16";
  const Result trained = run_patchbay("train " + quickstart + " --set optimizer.kind=sgd" + tiny);
  INFO(trained.output);
  REQUIRE(trained.exit_code == 0);
  const std::string stored = read(folder.path / "run" / "config.toml");
  CHECK(contains(stored, "[optimizer]\nkind = \"sgd\"\n"));
  CHECK(contains(stored, "[optimizer.sgd]\n"));
  CHECK(contains(stored, "momentum = 0.9\n"));
  CHECK_FALSE(contains(stored, "adamw"));
  CHECK_FALSE(contains(stored, "beta1"));

  // The same command on the old flat form fails: the reason the configs moved to per-kind tables.
  std::ofstream(folder.path / "flat.toml")
      << "include = [\"" << PATCHBAY_CONFIGS << "/quickstart.toml\"]\n"
      << "[optimizer]\nkind = \"adamw\"\nbeta1 = 0.9\n";
  const Result flat = run_patchbay("config check '" + (folder.path / "flat.toml").string() +
                                   "' --set optimizer.kind=sgd");
  CHECK(flat.exit_code == 3);
  CHECK(contains(flat.output, "optimizer.beta1: unknown key"));
  CHECK(contains(flat.output, "[optimizer.<name>]"));
  // ...and an inline table replacing [optimizer] is the one-override swap there.
  const Result replaced = run_patchbay("config check '" + (folder.path / "flat.toml").string() +
                                       "' --set 'optimizer={kind=\"sgd\"}'");
  CHECK(replaced.exit_code == 0);

  const Result shown = run_patchbay("config show " + quickstart);
  CHECK(shown.exit_code == 0);
  CHECK(contains(shown.output, "[optimizer.adamw]\n"));
  CHECK(contains(
      shown.output,
      "[optimizer.sgd]  # ignored: not used: optimizer kind = \"adamw\"\nmomentum = 0.9\n"));
}
