// The masked-LM objective as a user meets it through the `patchbay` executable: a tiny MLM
// run trained by `patchbay train`, `patchbay eval` reporting the masked-token loss and
// accuracy, `patchbay generate` refusing the bidirectional model with a message that says why
// and what to use instead, and `patchbay train` refusing mlm with a causal model.
#include <doctest/doctest.h>
#include <sys/wait.h>

#include <array>
#include <cstdio>
#include <fstream>
#include <string>

#include "../train/train_fixture.hpp"

#include "../command_runner.hpp"

namespace {

using Result = patchbay::testing::CommandResult;

Result run_patchbay(const std::string& arguments) {
  return patchbay::testing::run_patchbay(arguments, "OMP_NUM_THREADS=1");
}

bool contains(const std::string& text, const std::string& part) {
  return text.find(part) != std::string::npos;
}

}  // namespace

TEST_CASE("patchbay train / eval / generate with a masked-LM run") {
  const auto folder = patchbay::train::testing::fresh_folder("mlm_cli");
  patchbay::train::testing::write_tiny_corpus(folder);
  const std::string config = (folder / "mlm.toml").string();
  std::ofstream(config) << patchbay::train::testing::tiny_config_text(
      folder,
      "objective = \"mlm\"\n"  // continues [train]
      "[train.mlm]\nmask_token = \"<|mask|>\"\n");
  const std::string mlm =
      " --set 'tokenizer.special_tokens=[\"<|endoftext|>\", \"<|mask|>\"]' --set model.causal=false"
      " --set model.attention.causal=false --set train.max_steps=4";
  const Result refused = run_patchbay("train '" + config + "' --set train.max_steps=4");
  CHECK(refused.exit_code != 0);
  CHECK(contains(refused.output, "train.objective = \"mlm\" needs a bidirectional model"));

  const Result trained = run_patchbay("train '" + config + "'" + mlm + " --no-progress");
  INFO(trained.output);
  REQUIRE(trained.exit_code == 0);
  CHECK(contains(trained.output, "masked-token accuracy"));
  CHECK_FALSE(contains(trained.output, "--- sample"));

  const std::string run_dir = (folder / "run").string();
  const Result evaluated = run_patchbay("eval '" + run_dir + "'");
  INFO(evaluated.output);
  CHECK(evaluated.exit_code == 0);
  CHECK(contains(evaluated.output, "masked tokens (train.objective = \"mlm\")"));
  CHECK(contains(evaluated.output, "masked-token accuracy: "));

  const Result generated = run_patchbay("generate '" + run_dir + "' --prompt 'the cat'");
  INFO(generated.output);
  CHECK(generated.exit_code != 0);
  CHECK(contains(generated.output, "holds a model trained with train.objective = \"mlm\""));
  CHECK(contains(generated.output, "cannot continue text left to right"));
}
