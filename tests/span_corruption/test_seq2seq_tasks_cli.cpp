// An encoder-decoder whose cross-attention is linformer (attention interface 1.6: keys weighed
// by position, padded keys zeroed in place) through the `patchbay` executable: `plugins
// describe` lists the capability, `train` with train.objective = "seq2seq", `generate
// --source` (greedy, beams: the cross memory projected once per source) and `eval --tasks`
// (lm-eval's seq2seq convention: the context to the encoder, the continuation scored by the
// decoder) on a multiple-choice and a generation task.
#include <doctest/doctest.h>

#include <fstream>
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

TEST_CASE("plugins describe linformer lists cross-attention, positional in its keys") {
  const Result described = run_patchbay("plugins describe linformer");
  INFO(described.output);
  CHECK(described.exit_code == 0);
  CHECK(contains(described.output, "cross-attention, cross-attention keys by position"));
}

TEST_CASE("a linformer cross-attention encoder-decoder trains, decodes and runs eval --tasks") {
  const auto folder = patchbay::train::testing::fresh_folder("seq2seq_tasks_cli");
  const std::string config = patchbay::testing::write_seq2seq_cli_run(folder);
  const std::string model_settings =
      " --set 'model.architecture=\"encoder_decoder\"' --set 'model.positional=\"t5_relative\"'"
      " --set 'model.norm=\"rmsnorm\"' --set 'model.cross_attention=\"linformer\"'"
      " --set model.attention.linformer.k=8 --set model.source_context_length=24";
  // [model.attention.linformer] is used (model.cross_attention names it), not ignored.
  const Result shown = run_patchbay("config show '" + config + "'" + model_settings);
  INFO(shown.output);
  CHECK(shown.exit_code == 0);
  CHECK(contains(shown.output, "[model.attention.linformer]\nk = 8\n"));
  const Result trained = run_patchbay("train '" + config + "'" + model_settings +
                                      " --set train.max_steps=20 --set train.eval_every=20"
                                      " --set train.checkpoint_every=20 --no-progress");
  INFO(trained.output);
  REQUIRE(trained.exit_code == 0);

  const std::string run_dir = (folder / "run").string();
  for (const std::string mode : {"", " --num-beams 3"}) {
    const Result generated =
        run_patchbay("generate '" + run_dir + "' --source 'the cat' -n 8" + mode);
    INFO(generated.output);
    CHECK(generated.exit_code == 0);
    CHECK(contains(generated.output, "encoder-decoder decoding"));
  }

  std::ofstream(folder / "mc.jsonl")
      << R"({"q": "the cat", "choices": ["a dog", "ran to"], "label": 0})"
      << "\n"
      << R"({"q": "sat on", "choices": ["a dog", "ran to"], "label": 1})"
      << "\n";
  std::ofstream(folder / "mc.yaml") << "task: pairs_mc\ndataset_path: json\n"
                                       "dataset_kwargs: {data_files: {test: mc.jsonl}}\n"
                                       "test_split: test\noutput_type: multiple_choice\n"
                                       "doc_to_text: \"{{q}}\"\ndoc_to_choice: \"{{choices}}\"\n"
                                       "doc_to_target: label\ntarget_delimiter: \"\"\n";
  std::ofstream(folder / "gen.yaml")
      << "task: pairs_gen\ndataset_path: json\n"
         "dataset_kwargs: {data_files: {test: mc.jsonl}}\n"
         "test_split: test\noutput_type: generate_until\n"
         "doc_to_text: \"{{q}}\"\ndoc_to_target: \"{{choices[label]}}\"\n"
         "generation_kwargs: {until: [\"\\n\"], max_gen_toks: 8}\n";
  const Result tasks =
      run_patchbay("eval '" + run_dir + "' --tasks '" + (folder / "mc.yaml").string() + "," +
                   (folder / "gen.yaml").string() + "' --log-samples '" +
                   (folder / "samples.jsonl").string() + "'");
  INFO(tasks.output);
  CHECK(tasks.exit_code == 0);
  CHECK(contains(tasks.output, "pairs_mc"));
  CHECK(contains(tasks.output, "acc"));
  CHECK(contains(tasks.output, "pairs_gen"));
  CHECK(contains(tasks.output, "exact_match"));
  CHECK(contains(tasks.output, "4 requests as 4 rows"));
  std::ifstream samples(folder / "samples.jsonl");
  std::string first;
  CHECK(static_cast<bool>(std::getline(samples, first)));
  CHECK(contains(first, "\"loglikelihoods\""));
}
