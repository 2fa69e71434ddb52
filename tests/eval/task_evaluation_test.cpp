// Task files end to end: few-shot prompts drawn as lm-eval draws them (Python's
// Random(1234).sample), determinism, bad input named by doc and field, and a multiple-choice
// task whose acc / acc_norm / per-item log-likelihoods are checked against direct forwards.
#include "eval/task_evaluation.hpp"

#include <doctest/doctest.h>

#include <fstream>
#include <patchbay/testing/temp_dir.hpp>

#include "common/error.hpp"
#include "eval/answer_metrics.hpp"
#include "eval/task_docs.hpp"
#include "tiny_model.hpp"
#include "toy_codec.hpp"

namespace ev = patchbay::eval;
namespace fs = std::filesystem;
using nlohmann::json;

namespace {

void write(const fs::path& p, const std::string& text) { std::ofstream(p) << text; }

// prefix + i + suffix, appended piece by piece (GCC 12's -Wrestrict false positive on
// chained operator+ of short literals, PR 105329).
std::string numbered(const char* prefix, int i, const char* suffix = "") {
  std::string s(prefix);
  s.append(std::to_string(i)).append(suffix);
  return s;
}

std::string lines(const std::vector<json>& docs) {
  std::string out;
  for (const json& d : docs) out += d.dump() + "\n";
  return out;
}

const char* kYaml = R"(task: toy_mc
dataset_path: json
dataset_kwargs: {data_files: {test: test.jsonl, train: train.jsonl}}
test_split: test
training_split: train
output_type: multiple_choice
doc_to_text: "{{q}}"
doc_to_choice: "{{choices}}"
doc_to_target: label
num_fewshot: 2
)";

// train: Q0..Q9 with answers a/b alternating; test: T0..T3 over choices of different lengths.
fs::path make_task(const patchbay::testing::TempDir& dir, std::vector<json> test_docs = {}) {
  std::vector<json> train;
  for (int i = 0; i < 10; ++i)
    train.push_back({{"q", numbered("Q", i)}, {"choices", {"a", "b"}}, {"label", i % 2}});
  if (test_docs.empty())
    for (int i = 0; i < 4; ++i)
      test_docs.push_back(
          {{"q", numbered("T", i, ":")}, {"choices", {"a", "b c", "cab"}}, {"label", i % 3}});
  write(dir.path() / "train.jsonl", lines(train));
  write(dir.path() / "test.jsonl", lines(test_docs));
  write(dir.path() / "toy.yaml", kYaml);
  return dir.path() / "toy.yaml";
}

}  // namespace

TEST_CASE("few-shot examples are those Python's Random(1234).sample draws, doc after doc") {
  patchbay::testing::TempDir dir("eval");
  const ev::TaskSpec spec = ev::load_task_file(make_task(dir));
  const ev::TaskRequests r = ev::build_task_requests(spec, std::nullopt, std::nullopt);
  // random.Random(1234): sample(range(10), 2) three times -> [7, 1], [0, 1], [9, 0].
  CHECK(r.items[0].prompt == "Q7 b\n\nQ1 b\n\nT0:");
  CHECK(r.items[1].prompt == "Q0 a\n\nQ1 b\n\nT1:");
  CHECK(r.items[2].prompt == "Q9 b\n\nQ0 a\n\nT2:");
  CHECK(r.items[0].continuations == std::vector<std::string>{" a", " b c", " cab"});
  CHECK(r.items[2].gold == std::vector<int64_t>{2});
  // Deterministic; another seed draws others; 0-shot is the bare text.
  CHECK(ev::build_task_requests(spec, std::nullopt, std::nullopt).items[3].prompt ==
        r.items[3].prompt);
  CHECK(ev::build_task_requests(spec, std::nullopt, std::nullopt, 7).items[0].prompt !=
        r.items[0].prompt);
  CHECK(ev::build_task_requests(spec, 0, 2).items.size() == 2);
  CHECK(ev::build_task_requests(spec, 0, 2).items[1].prompt == "T1:");
}

TEST_CASE("bad documents are refused naming the task, the doc and the field") {
  patchbay::testing::TempDir dir("eval");
  const json good = {{"q", "x"}, {"choices", {"a", "b"}}, {"label", 0}};
  const json empty_choices = {{"q", "x"}, {"choices", json::array()}, {"label", 0}};
  const json out_of_range = {{"q", "x"}, {"choices", {"a", "b"}}, {"label", 5}};
  ev::TaskSpec spec = ev::load_task_file(make_task(dir, {good, empty_choices}));
  CHECK_THROWS_WITH_AS(ev::build_task_requests(spec, 0, std::nullopt),
                       doctest::Contains("doc 1, doc_to_choice: the choice list is empty"),
                       patchbay::Error);
  spec = ev::load_task_file(make_task(dir, {good, good, out_of_range}));
  CHECK_THROWS_WITH_AS(ev::build_task_requests(spec, 0, std::nullopt),
                       doctest::Contains("doc 2, doc_to_target: answer index 5 is out of range"),
                       patchbay::Error);
  spec = ev::load_task_file(make_task(dir, {good}));
  CHECK_THROWS_WITH_AS(ev::build_task_requests(spec, 11, std::nullopt),
                       doctest::Contains("num_fewshot"), patchbay::Error);
  // A later document without the field doc_to_target names (fuzz_task_files: an escaped
  // json::out_of_range before).
  const json no_label = {{"q", "x"}, {"choices", {"a", "b"}}};
  spec = ev::load_task_file(make_task(dir, {good, no_label}));
  CHECK_THROWS_WITH_AS(ev::build_task_requests(spec, 0, std::nullopt),
                       doctest::Contains("doc 1, doc_to_target: this document has no field 'label'"),
                       patchbay::Error);
}

TEST_CASE(
    "a multiple-choice task scores acc and acc_norm from per-choice log-likelihoods of direct "
    "forwards") {
  patchbay::testing::TempDir dir("eval");
  const ev::TaskSpec spec = ev::load_task_file(make_task(dir));
  auto model = eval_test::tiny_model();
  const ev::TextCodec codec = eval_test::toy_codec();
  ev::EvalOptions options;
  options.num_fewshot = 1;  // prompts of 5-7 tokens + continuation: some exceed T = 8
  options.batch_size = 3;
  options.keep_samples = true;
  const ev::TaskResult result = ev::evaluate_task(*model, codec, spec, options);
  const ev::TaskRequests requests = ev::build_task_requests(spec, 1, std::nullopt);
  REQUIRE(result.samples.size() == 4);
  std::vector<double> acc, acc_norm;
  for (size_t i = 0; i < 4; ++i) {
    const ev::TaskItem& item = requests.items[i];
    std::vector<double> ll;
    for (const std::string& c : item.continuations) {
      const ev::TokenPair p = ev::encode_pair(codec, item.prompt, c, "test");
      ll.push_back(eval_test::direct_logprob(*model, p.context, p.continuation));
    }
    const json& sample = result.samples[i];
    CHECK(sample["prompt"] == item.prompt);
    for (size_t k = 0; k < ll.size(); ++k)
      CHECK(sample["loglikelihoods"][k].get<double>() == doctest::Approx(ll[k]).epsilon(1e-6));
    const ev::ChoiceScores c = ev::choose(ll, item.choices);
    acc.push_back(c.pred == item.gold[0] ? 1 : 0);
    acc_norm.push_back(c.pred_norm == item.gold[0] ? 1 : 0);
  }
  REQUIRE(result.metrics.size() == 2);
  CHECK(result.metrics[0].name == "acc");
  CHECK(result.metrics[0].value == doctest::Approx(ev::mean_with_stderr(acc).value));
  CHECK(result.metrics[1].name == "acc_norm");
  CHECK(result.metrics[1].value == doctest::Approx(ev::mean_with_stderr(acc_norm).value));
  CHECK(result.truncated_requests > 0);  // "Q7 b\n\nT0:" + " cab" is 10 tokens > T + 1
}

TEST_CASE("a rolling-perplexity task sums its windows; a generation task matches its target") {
  patchbay::testing::TempDir dir("eval");
  write(dir.path() / "docs.jsonl", lines({{{"text", "ab c ab"}}, {{"text", "a b c a b c a b"}}}));
  write(dir.path() / "ppl.yaml", R"(task: toy_ppl
dataset_path: json
dataset_kwargs: {data_files: {test: docs.jsonl}}
test_split: test
output_type: loglikelihood_rolling
doc_to_text: ""
doc_to_target: "{{text}}"
)");
  auto model = eval_test::tiny_model();
  const ev::TextCodec codec = eval_test::toy_codec();
  ev::EvalOptions options;
  options.keep_samples = true;
  const ev::TaskResult ppl =
      ev::evaluate_task(*model, codec, ev::load_task_file(dir.path() / "ppl.yaml"), options);
  double total = 0, bytes = 0;
  for (const json& s : ppl.samples) {
    const std::string text = s["text"];
    double ll = 0;
    for (const ev::TokenPair& w : ev::rolling_windows(codec.encode(text), 0, 8))
      ll += eval_test::direct_logprob(*model, w.context, w.continuation);
    CHECK(s["loglikelihood"].get<double>() == doctest::Approx(ll).epsilon(1e-6));
    total += ll;
    bytes += static_cast<double>(text.size());
  }
  REQUIRE(ppl.metrics.size() == 3);
  CHECK(ppl.metrics[2].name == "bits_per_byte");
  CHECK(ppl.metrics[2].value == doctest::Approx(-total / bytes / std::log(2.0)));

  write(dir.path() / "gen.yaml", R"yaml(task: toy_gen
dataset_path: json
dataset_kwargs: {data_files: {test: docs.jsonl}}
test_split: test
output_type: generate_until
doc_to_text: "x:"
doc_to_target: "{{text}}"
generation_kwargs: {until: ["\n"], max_gen_toks: 4}
filter_list:
  - name: first-letter
    filter: [{function: regex, regex_pattern: "([abc])", fallback: "none"}, {function: take_first}]
)yaml");
  const ev::TaskResult gen =
      ev::evaluate_task(*model, codec, ev::load_task_file(dir.path() / "gen.yaml"), options);
  REQUIRE(gen.metrics.size() == 1);
  CHECK(gen.metrics[0].name == "exact_match,first-letter");
  const std::string generated = gen.samples[0]["generation"];
  CHECK(gen.samples[0]["filtered"]["first-letter"] ==
        ev::apply_regex_filter({"([abc])", 0, "none"}, generated));
}
