// `patchbay eval RUN --tasks FILE` end to end: a freshly built model saved as a checkpoint with
// its tokenizer file, the command run as a separate process; its per-item log-likelihoods
// (--log-samples) and metrics (RUN/eval_tasks.json) must equal in-process evaluate_task on the
// same weights, and the task-only options and a bad task file are refused.
#include <doctest/doctest.h>

#include <filesystem>
#include <fstream>
#include <string>

#include "../command_runner.hpp"
#include "config/config_loader.hpp"
#include "data/split.hpp"
#include "eval/task_evaluation.hpp"
#include "model_fixture.hpp"
#include "patchbay/testing/temp_dir.hpp"
#include "train/checkpoint.hpp"

namespace fs = std::filesystem;
namespace ev = patchbay::eval;
namespace pm = patchbay::model;
namespace rt = patchbay::runtime;
using nlohmann::json;

namespace {

constexpr const char* kConfig = R"([tokenizer]
kind = "char"
[model]
context_length = 16
n_layers = 2
n_heads = 2
d_model = 16
init_std = 0.5
seed = 5
)";

constexpr const char* kTask = R"(task: words
dataset_path: json
dataset_kwargs: {data_files: {test: words.jsonl}}
test_split: test
output_type: multiple_choice
doc_to_text: "{{q}}"
doc_to_choice: "{{choices}}"
doc_to_target: label
)";

std::string read(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

patchbay::testing::CommandResult run(const std::string& args) {
  return patchbay::testing::run_shell(std::string(PATCHBAY_EXECUTABLE) + " " + args + " 2>&1");
}

}  // namespace

TEST_CASE("patchbay eval --tasks scores a saved checkpoint as evaluate_task does in-process") {
  const patchbay::testing::TempDir scratch("eval_cmd");
  const fs::path& dir = scratch.path();
  fs::create_directories(dir / "run");
  rt::ComponentConfig tokenizer_config(
      *model_test::registry().find(PB_KIND_TOKENIZER, "char").descriptor);
  rt::TokenizerHandle tokenizer =
      model_test::registry().create_tokenizer("char", tokenizer_config.view());
  tokenizer.train("In the beginning God created the heaven and the earth.");
  const fs::path tokenizer_file = dir / "run" / "tokenizer.txt";
  tokenizer.save(tokenizer_file.string());
  const patchbay::config::ResolvedConfig config =
      patchbay::config::load_config_text(kConfig, "test.toml");
  auto model =
      pm::LanguageModel::build(pm::model_options_from_config(config, tokenizer.vocab_size()),
                               pm::component_tables_from_config(config), model_test::registry());
  std::vector<patchbay::train::NamedTensor> tensors;
  for (const pm::NamedParameter& p : model->parameters()) tensors.push_back({p.name, p.tensor});
  patchbay::train::save_checkpoint(
      dir / "run", 0, tensors,
      {{patchbay::train::kMetaConfig, kConfig},
       {patchbay::train::kMetaTokenizerFile, tokenizer_file.string()},
       {patchbay::train::kMetaTokenizerHash,
        std::to_string(patchbay::data::fnv1a64(read(tokenizer_file)))}});

  std::ofstream(dir / "words.jsonl")
      << R"({"q": "In the", "choices": [" beginning", " earth", " heaven"], "label": 0}
{"q": "God created the", "choices": [" heaven", " earth"], "label": 0}
{"q": "and the earth ", "choices": ["God", "the heaven."], "label": 1}
)";
  std::ofstream(dir / "words.yaml") << kTask;

  const patchbay::testing::CommandResult r =
      run("eval " + (dir / "run").string() + " --tasks " + (dir / "words.yaml").string() +
          " --log-samples " + (dir / "samples.jsonl").string() + " --batch-size 2");
  INFO(r.output);
  REQUIRE(r.exit_code == 0);
  CHECK(r.output.find("acc_norm") != std::string::npos);

  // In process, same weights and tokenizer (other batch rows: float32 rounding only).
  ev::TextCodec codec;
  codec.encode = [&](std::string_view t) { return tokenizer.encode(t); };
  codec.decode = [&](const std::vector<int32_t>& ids) { return tokenizer.decode(ids); };
  ev::EvalOptions options;
  options.keep_samples = true;
  const ev::TaskResult expected =
      ev::evaluate_task(*model, codec, ev::load_task_file(dir / "words.yaml"), options);

  std::ifstream samples(dir / "samples.jsonl");
  size_t n = 0;
  for (std::string line; std::getline(samples, line); ++n) {
    const json s = json::parse(line);
    CHECK(s["task"] == "words");
    CHECK(s["prompt"] == expected.samples[n]["prompt"]);
    const std::vector<double> got = s["loglikelihoods"],
                              want = expected.samples[n]["loglikelihoods"];
    REQUIRE(got.size() == want.size());
    for (size_t k = 0; k < got.size(); ++k) CHECK(got[k] == doctest::Approx(want[k]).epsilon(1e-6));
  }
  CHECK(n == 3);
  const json results = json::parse(read(dir / "run" / "eval_tasks.json"));
  CHECK(results["tasks"][0]["metrics"]["acc"].get<double>() ==
        doctest::Approx(expected.metrics[0].value));
  CHECK(results["tasks"][0]["metrics"]["acc_norm"].get<double>() ==
        doctest::Approx(expected.metrics[1].value));

  // Task options without --tasks, and a task file with a field the reader does not know.
  const patchbay::testing::CommandResult no_tasks =
      run("eval " + (dir / "run").string() + " --limit 2");
  CHECK(no_tasks.exit_code != 0);
  CHECK(no_tasks.output.find("--limit applies to task evaluation") != std::string::npos);
  std::ofstream(dir / "bad.yaml") << std::string(kTask)
                                  << "process_docs: !function utils.process\n";
  const patchbay::testing::CommandResult bad =
      run("eval " + (dir / "run").string() + " --tasks " + (dir / "bad.yaml").string());
  CHECK(bad.exit_code != 0);
  CHECK(bad.output.find("field 'process_docs'") != std::string::npos);
}
