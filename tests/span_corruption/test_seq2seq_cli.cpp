// The encoder-decoder through the `patchbay` executable: `train` with train.objective =
// "seq2seq", `generate RUN --source TEXT` (greedy decoding with the caches), and the refusals:
// --prompt for an encoder-decoder, --source for a single-stack run; `eval` scores the run with
// its objective.
#include <doctest/doctest.h>

#include <fstream>
#include <string>

#include "../command_runner.hpp"
#include "../train/train_fixture.hpp"

namespace {

using Result = patchbay::testing::CommandResult;

Result run_patchbay(const std::string& arguments) {
  return patchbay::testing::run_patchbay(arguments, "OMP_NUM_THREADS=1");
}

bool contains(const std::string& text, const std::string& part) {
  return text.find(part) != std::string::npos;
}

}  // namespace

TEST_CASE("patchbay train / generate --source with a seq2seq encoder-decoder run") {
  const auto folder = patchbay::train::testing::fresh_folder("seq2seq_cli");
  patchbay::train::testing::write_tiny_corpus(folder);
  std::ofstream(folder / "pairs.jsonl") << R"({"source": "the cat", "target": "a dog"})"
                                        << "\n"
                                        << R"({"source": "sat on", "target": "ran to"})"
                                        << "\n";
  const std::string config = (folder / "seq2seq.toml").string();
  std::ofstream(config) << patchbay::train::testing::tiny_config_text(
      folder, "objective = \"seq2seq\"\n[train.seq2seq]\ntrain_file = \"" +
                  (folder / "pairs.jsonl").string() + "\"\nvalidation_file = \"" +
                  (folder / "pairs.jsonl").string() + "\"\n");
  const std::string seq2seq =
      " --set 'model.architecture=\"encoder_decoder\"' --set 'model.positional=\"t5_relative\"'"
      " --set 'model.norm=\"rmsnorm\"' --set train.max_steps=40 --set train.eval_every=40"
      " --set train.checkpoint_every=40";
  const Result trained = run_patchbay("train '" + config + "'" + seq2seq + " --no-progress");
  INFO(trained.output);
  REQUIRE(trained.exit_code == 0);
  CHECK_FALSE(contains(trained.output, "--- sample"));

  const std::string run_dir = (folder / "run").string();
  const Result generated = run_patchbay("generate '" + run_dir + "' --source 'the cat' -n 12");
  INFO(generated.output);
  CHECK(generated.exit_code == 0);
  CHECK(contains(generated.output, "greedy encoder-decoder decoding"));
  CHECK(contains(generated.output, "source 7 tokens"));

  const Result prompt = run_patchbay("generate '" + run_dir + "' --prompt 'the cat'");
  CHECK(prompt.exit_code != 0);
  CHECK(contains(prompt.output, "give --source TEXT instead of --prompt"));
  const Result sampled =
      run_patchbay("generate '" + run_dir + "' --source 'the cat' --temperature 0.8");
  CHECK(sampled.exit_code != 0);
  CHECK(contains(sampled.output, "greedy only for now"));
  const Result evaluated = run_patchbay("eval '" + run_dir + "'");
  INFO(evaluated.output);
  CHECK(evaluated.exit_code == 0);
  CHECK(contains(evaluated.output, "target tokens (train.objective = \"seq2seq\")"));
  CHECK(contains(evaluated.output, "loss: "));

  // A single-stack run given a source.
  const std::string clm = (folder / "clm.toml").string();
  std::ofstream(clm) << patchbay::train::testing::tiny_config_text(folder);
  const Result causal =
      run_patchbay("train '" + clm + "' --set train.max_steps=3 --set 'train.out_dir=\"" +
                   (folder / "clm_run").string() + "\"' --no-progress");
  REQUIRE(causal.exit_code == 0);
  const Result given_source =
      run_patchbay("generate '" + (folder / "clm_run").string() + "' --source 'the cat'");
  CHECK(given_source.exit_code != 0);
  CHECK(contains(given_source.output, "which has no encoder to read a source"));
}
