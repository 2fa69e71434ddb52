// The encoder-decoder through the `patchbay` executable: `train` with train.objective =
// "seq2seq", `generate RUN --source TEXT` (greedy, sampled, beams, a regex constraint whose
// outputs must match it, a file of sources) and the refusals: --prompt for an encoder-decoder,
// --source for a single-stack run, a bad source file; `eval` scores the run with its
// objective, and `eval --test` reports loss, BLEU and chrF (greedy and beams, and copying).
#include <doctest/doctest.h>

#include <fstream>
#include <regex>
#include <sstream>
#include <string>

#include "../command_runner.hpp"
#include "../train/train_fixture.hpp"
#include "seq2seq_cli_fixture.hpp"

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
  const std::string config = patchbay::testing::write_seq2seq_cli_run(folder);
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
  CHECK(contains(generated.output, "encoder-decoder decoding"));
  CHECK(contains(generated.output, "sampler chain: greedy"));
  CHECK(contains(generated.output, "1 source(s)"));

  const Result prompt = run_patchbay("generate '" + run_dir + "' --prompt 'the cat'");
  CHECK(prompt.exit_code != 0);
  CHECK(contains(prompt.output, "give --source TEXT instead of --prompt"));
  // The decoder-only sampling chain, with its options and seed.
  const Result sampled = run_patchbay(
      "generate '" + run_dir + "' --source 'the cat' --temperature 0.8 --top-p 0.9 --seed 4 -n 8");
  INFO(sampled.output);
  CHECK(sampled.exit_code == 0);
  CHECK(contains(sampled.output, "sampler chain: temperature"));
  // Beam search: two sequences, best first, with scores.
  const Result beams = run_patchbay(
      "generate '" + run_dir + "' --source 'the cat' --num-beams 3 --num-return-sequences 2 -n 8");
  INFO(beams.output);
  CHECK(beams.exit_code == 0);
  CHECK(contains(beams.output, "beam search: 3 beams"));
  CHECK(contains(beams.output, "[1] score "));
  CHECK(contains(beams.output, "[2] score "));
  // A grammar constraint (a finite language, so -n 9 cannot cut a string short): the output
  // matches the regular expression, sampled and with beams.
  for (const std::string mode : {" --temperature 1 --seed 2", " --num-beams 3"}) {
    const Result constrained =
        run_patchbay("generate '" + run_dir + "' --source 'the cat' --regex 'a(ta)?' -n 9" + mode);
    INFO(constrained.output);
    CHECK(constrained.exit_code == 0);
    std::istringstream lines(constrained.output);
    std::string line, output;
    while (std::getline(lines, line))
      if (!line.empty() && line[0] == 'a') output = line;  // no stderr line starts with 'a'
    CHECK(std::regex_match(output, std::regex("a(ta)?")));
  }
  // A file of sources, one output a line, as plain lines or JSON Lines.
  std::ofstream(folder / "sources.txt") << "the cat\n\na dog\nsat on\n";
  std::ofstream(folder / "sources.jsonl") << R"({"source": "the cat"})"
                                          << "\n"
                                          << R"({"source": "a dog", "target": "x"})"
                                          << "\n";
  const Result listed = run_patchbay("generate '" + run_dir + "' --source-file '" +
                                     (folder / "sources.txt").string() + "' -n 6 --num-beams 2");
  INFO(listed.output);
  CHECK(listed.exit_code == 0);
  CHECK(contains(listed.output, "3 source(s)"));
  const Result json = run_patchbay("generate '" + run_dir + "' --source-file '" +
                                   (folder / "sources.jsonl").string() + "' -n 6");
  CHECK(json.exit_code == 0);
  CHECK(contains(json.output, "2 source(s)"));
  std::ofstream(folder / "bad.jsonl") << R"({"source": "the cat"})"
                                      << "\n"
                                      << R"({"text": 1})"
                                      << "\n";
  const Result bad = run_patchbay("generate '" + run_dir + "' --source-file '" +
                                  (folder / "bad.jsonl").string() + "'");
  CHECK(bad.exit_code != 0);
  CHECK(contains(bad.output, "bad.jsonl:2: expected a JSON object with a string \"source\""));
  const Result both = run_patchbay("generate '" + run_dir + "' --source a --source-file '" +
                                   (folder / "sources.txt").string() + "'");
  CHECK(both.exit_code != 0);
  CHECK(contains(both.output, "not both"));

  const Result evaluated = run_patchbay("eval '" + run_dir + "'");
  INFO(evaluated.output);
  CHECK(evaluated.exit_code == 0);
  CHECK(contains(evaluated.output, "target tokens (train.objective = \"seq2seq\")"));
  CHECK(contains(evaluated.output, "loss: "));
  // A test set: loss, BLEU and chrF of greedy and beam decodes and of copying the source.
  const std::string outputs = (folder / "decodes.txt").string();
  for (const std::string beams_option : {"", " --num-beams 2"}) {
    const Result tested =
        run_patchbay("eval '" + run_dir + "' --test '" + (folder / "pairs.jsonl").string() +
                     "' --outputs '" + outputs + "'" + beams_option);
    INFO(tested.output);
    CHECK(tested.exit_code == 0);
    CHECK(contains(tested.output, "2 pairs"));
    CHECK(contains(tested.output, "nats per target token"));
    CHECK(contains(tested.output,
                   beams_option.empty() ? "model (greedy" : "model (beam search, 2 beams"));
    CHECK(contains(tested.output, "copy-the-source baseline: BLEU = "));
    CHECK(contains(tested.output, "chrF2 = "));
    std::ifstream written(outputs);
    std::string first, second, third;
    CHECK(static_cast<bool>(std::getline(written, first)));
    CHECK(static_cast<bool>(std::getline(written, second)));
    CHECK_FALSE(static_cast<bool>(std::getline(written, third)));
  }
  const Result no_targets =
      run_patchbay("eval '" + run_dir + "' --test '" + (folder / "sources.jsonl").string() + "'");
  CHECK(no_targets.exit_code != 0);
  CHECK(contains(no_targets.output, "sources.jsonl:1: a test set needs a \"target\""));
  const Result beams_alone = run_patchbay("eval '" + run_dir + "' --num-beams 2");
  CHECK(beams_alone.exit_code != 0);
  CHECK(contains(beams_alone.output, "add --test FILE"));

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
