// [eval] tasks during training (core/train/training_tasks.hpp), end to end on the tiny
// character model: the evaluation records of metrics.jsonl carry every task metric labelled
// with its name (and lm-eval's stderr); the last step's values equal `evaluate_task` on the
// final checkpoint; task_every thins the steps; a per-entry ":N" limit counts documents; a bad
// task name is refused by the config check and before training writes anything; and
// `patchbay compare`'s table over two seeds' runs has the task metrics with mean ± std and CI.
#include <doctest/doctest.h>

#include <cmath>
#include <filesystem>
#include <fstream>

#include "analysis/compare_table.hpp"
#include "analysis/run_results.hpp"
#include "common/error.hpp"
#include "data/tokenizer_io.hpp"
#include "eval/task_evaluation.hpp"
#include "eval/tokenizer_codec.hpp"
#include "run/metrics_log.hpp"
#include "train/checkpoint.hpp"
#include "train/config_preflight.hpp"
#include "train/trainer.hpp"
#include "train/training_tasks.hpp"
#include "train_fixture.hpp"

namespace fs = std::filesystem;
using namespace patchbay;
using namespace patchbay::train;
namespace tt = patchbay::train::testing;
using nlohmann::json;

namespace {

// A 3-way multiple-choice task and a cloze (loglikelihood) task over the tiny corpus's sentences.
void write_tasks(const fs::path& folder) {
  std::ofstream(folder / "words.jsonl")
      << R"({"q": "the cat sat on", "choices": ["the mat.", "a tree.", "the river."], "label": 0})"
      << "\n"
      << R"({"q": "a dog ran to", "choices": ["the door.", "the mat.", "a tree."], "label": 1})"
      << "\n"
      << R"({"q": "the bird looked at", "choices": ["a tree.", "the river.", "the door."], "label": 2})"
      << "\n"
      << R"({"q": "my fish slept by", "choices": ["the river.", "the door.", "the mat."], "label": 0})"
      << "\n";
  std::ofstream(folder / "words.yaml")
      << "task: words\ndataset_path: json\ndataset_kwargs: {data_files: {test: words.jsonl}}\n"
         "test_split: test\noutput_type: multiple_choice\ndoc_to_text: \"{{q}}\"\n"
         "doc_to_choice: \"{{choices}}\"\ndoc_to_target: label\n";
  std::ofstream(folder / "cloze.jsonl") << R"({"text": "the cat sat on the", "word": " mat."})"
                                        << "\n"
                                        << R"({"text": "a dog ran to the", "word": " door."})"
                                        << "\n"
                                        << R"({"text": "my fish slept by a", "word": " tree."})"
                                        << "\n"
                                        << R"({"text": "the bird sat on the", "word": " mat."})"
                                        << "\n";
  std::ofstream(folder / "cloze.yaml")
      << "task: cloze\ndataset_path: json\ndataset_kwargs: {data_files: {test: cloze.jsonl}}\n"
         "test_split: test\noutput_type: loglikelihood\ndoc_to_text: text\n"
         "doc_to_target: word\n";
}

std::string eval_section(const fs::path& folder, const std::string& extra = "") {
  return "[eval]\ntasks = [\"" + (folder / "words.yaml").string() + "\", \"" +
         (folder / "cloze.yaml").string() + ":3\"]\n" + extra;
}

std::vector<json> evaluation_records(const fs::path& run_dir) {
  std::vector<json> out;
  for (const json& r : run::read_metrics(run_dir / "metrics.jsonl"))
    if (r.contains("val_loss")) out.push_back(r);
  return out;
}

}  // namespace

TEST_CASE("[eval] tasks write labelled task metrics at evaluation steps, equal to evaluate_task") {
  const auto folder = tt::fresh_folder("tasks");
  tt::write_tiny_corpus(folder);
  write_tasks(folder);
  tt::TinySetup setup;
  const config::ResolvedConfig config =
      setup.config(tt::tiny_config_text(folder, eval_section(folder)));
  const TrainSummary summary = train_model(config, setup.registry, setup.lookup,
                                           {.show_progress = false, .print_samples = false});
  const std::vector<json> evals = evaluation_records(summary.run_dir);
  REQUIRE(evals.size() == 2);  // steps 3 and 6
  for (const json& r : evals) {
    for (const char* key :
         {"task.words.acc", "task.words.acc_norm", "task.words.acc_stderr",
          "task.words.acc_norm_stderr", "task.cloze.perplexity", "task.cloze.acc", "task_seconds"})
      CHECK_MESSAGE(r.contains(key), key);
    CHECK(r["task.words.items"] == 4);
    CHECK(r["task.cloze.items"] == 3);  // the entry's ":3"
    CHECK(r["task.words.acc"].get<double>() >= 0.0);
    CHECK(r["task.words.acc"].get<double>() <= 1.0);
    CHECK(r["task.cloze.perplexity"].get<double>() > 1.0);
  }

  // The step-6 record against evaluate_task on the final checkpoint, loaded afresh.
  const Checkpoint checkpoint = load_checkpoint(summary.run_dir);
  REQUIRE(checkpoint.step() == 6);
  data::TokenizerSettings settings;
  settings.kind = "char";
  const runtime::TokenizerHandle tokenizer =
      data::load_tokenizer(setup.registry, summary.run_dir / "tokenizer.txt", settings);
  auto model =
      model::LanguageModel::build(model::model_options_from_config(config, tokenizer.vocab_size()),
                                  model::component_tables_from_config(config), setup.registry);
  std::vector<NamedTensor> params;
  for (const model::NamedParameter& p : model->parameters()) params.push_back({p.name, p.tensor});
  checkpoint.load_into(params);
  const eval::TextCodec codec = eval::text_codec_of(tokenizer);
  eval::EvalOptions options;
  const eval::TaskResult words = eval::evaluate_task(
      *model, codec, eval::load_task_file(folder.path() / "words.yaml"), options);
  options.limit = 3;
  const eval::TaskResult cloze = eval::evaluate_task(
      *model, codec, eval::load_task_file(folder.path() / "cloze.yaml"), options);
  const json& last = evals.back();
  for (const eval::TaskResult* result : {&words, &cloze})
    for (const eval::MetricResult& m : result->metrics) {
      const std::string key = "task." + result->task + "." + m.name;
      REQUIRE_MESSAGE(last.contains(key), key);
      CHECK_MESSAGE(last[key].get<double>() == doctest::Approx(m.value).epsilon(1e-12), key);
    }
}

TEST_CASE("task_every thins the task steps; compare shows task metrics over seeds with CIs") {
  const auto folder = tt::fresh_folder("tasks_compare");
  tt::write_tiny_corpus(folder);
  write_tasks(folder);
  tt::TinySetup setup;
  std::vector<fs::path> runs;
  for (int seed : {7, 8}) {
    const fs::path out = folder.path() / ("run" + std::to_string(seed));
    const config::ResolvedConfig config = setup.config(
        tt::tiny_config_text(folder, eval_section(folder, "task_every = 6\n")),
        {"run.seed=" + std::to_string(seed), "train.out_dir=\"" + out.string() + "\""});
    train_model(config, setup.registry, setup.lookup,
                {.show_progress = false, .print_samples = false});
    const std::vector<json> evals = evaluation_records(out);
    REQUIRE(evals.size() == 2);
    CHECK_FALSE(evals[0].contains("task.words.acc"));  // step 3: not a multiple of task_every
    CHECK(evals[1].contains("task.words.acc"));
    runs.push_back(out);
  }
  const std::vector<analysis::RunGroup> groups = analysis::group_runs(analysis::collect_runs(runs));
  REQUIRE(groups.size() == 1);
  const analysis::CompareTable table = analysis::build_compare_table(groups, 0);
  const auto row =
      std::find_if(table.task_rows.begin(), table.task_rows.end(),
                   [](const analysis::TaskMetricRow& r) { return r.metric == "words.acc_norm"; });
  REQUIRE(row != table.task_rows.end());
  CHECK(row->n == 2);
  CHECK(row->seeds == std::vector<int64_t>{7, 8});
  const double a = groups[0].runs[0].task_metrics.at("words.acc_norm");
  const double b = groups[0].runs[1].task_metrics.at("words.acc_norm");
  CHECK(row->mean == doctest::Approx((a + b) / 2));
  CHECK(row->std == doctest::Approx(std::fabs(a - b) / std::sqrt(2.0)));
  CHECK(row->ci.low == doctest::Approx(std::min(a, b)));  // two values: the bootstrap's extremes
  CHECK(row->ci.high == doctest::Approx(std::max(a, b)));
  CHECK(std::isfinite(row->item_stderr));
  const std::string markdown = analysis::to_markdown(table);
  CHECK(markdown.find("| task metric |") != std::string::npos);
  CHECK(markdown.find("| words.acc |") != std::string::npos);
  CHECK(markdown.find("| cloze.perplexity |") != std::string::npos);
  CHECK(markdown.find("95% CI") != std::string::npos);
  CHECK(analysis::task_metrics_csv(table).find("words.acc_norm,") != std::string::npos);
  CHECK(analysis::to_json(table).find("\"task_rows\"") != std::string::npos);
}

TEST_CASE("a bad [eval] task is refused by the config check and before training writes anything") {
  const auto folder = tt::fresh_folder("tasks_bad");
  tt::write_tiny_corpus(folder);
  write_tasks(folder);
  tt::TinySetup setup;
  const config::ResolvedConfig config =
      setup.config(tt::tiny_config_text(folder, "[eval]\ntasks = [\"words_typo\"]\n"));
  try {
    preflight_training_config(config, setup.registry, setup.lookup);
    FAIL("a task that does not exist passed the config check");
  } catch (const Error& e) {
    CHECK(std::string(e.what()).find("eval.tasks[0] = \"words_typo\"") != std::string::npos);
    CHECK(std::string(e.what()).find("neither a file nor a shipped task") != std::string::npos);
  }
  CHECK_THROWS_AS(train_model(config, setup.registry, setup.lookup, {.show_progress = false}),
                  Error);
  CHECK_FALSE(fs::exists(folder.path() / "run" / "metrics.jsonl"));

  // The same task twice, a limit of 0, a bidirectional model.
  const std::string words = (folder.path() / "words.yaml").string();
  CHECK_THROWS_WITH_AS(check_training_tasks(setup.config(tt::tiny_config_text(
                           folder, "[eval]\ntasks = [\"" + words + "\", \"" + words + ":2\"]\n"))),
                       doctest::Contains("named twice"), Error);
  CHECK_THROWS_WITH_AS(check_training_tasks(setup.config(tt::tiny_config_text(
                           folder, "[eval]\ntasks = [\"" + words + ":0\"]\n"))),
                       doctest::Contains("eval.tasks[0]"), Error);
  CHECK_THROWS_WITH_AS(check_training_tasks(setup.config(
                           tt::tiny_config_text(folder, "[eval]\ntasks = [\"" + words + "\"]\n"),
                           {"model.causal=false"})),
                       doctest::Contains("model.causal = false"), Error);
}
