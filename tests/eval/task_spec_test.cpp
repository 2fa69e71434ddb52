// Task YAML: the supported fields read into TaskSpec; anything else refused naming the field.
#include "eval/task_spec.hpp"

#include <doctest/doctest.h>

#include "common/error.hpp"

namespace ev = patchbay::eval;

namespace {

const char* kTask = R"(task: demo
dataset_path: json
dataset_kwargs:
  data_files:
    test: demo.jsonl
    train: demo_train.jsonl
test_split: test
training_split: train
output_type: multiple_choice
doc_to_text: "Q: {{question}}\nA:"
doc_to_choice: "{{choices}}"
doc_to_target: label
target_delimiter: " "
fewshot_delimiter: "\n\n"
num_fewshot: 2
metric_list:
  - metric: acc
    aggregation: mean
    higher_is_better: true
metadata:
  version: 1.0
)";

ev::TaskSpec parse(const std::string& text) {
  return ev::parse_task_yaml(text, "demo.yaml", "/tasks");
}

}  // namespace

TEST_CASE("a multiple-choice task file reads into typed options") {
  const ev::TaskSpec s = parse(kTask);
  CHECK(s.name == "demo");
  CHECK(s.output_type == ev::OutputType::kMultipleChoice);
  CHECK(s.data_files.at("test") == "/tasks/demo.jsonl");
  CHECK(*s.test_split == "test");
  CHECK(std::get<std::string>(s.doc_to_text) == "Q: {{question}}\nA:");
  CHECK(std::get<std::string>(s.doc_to_target) == "label");
  CHECK(s.num_fewshot == 2);
  CHECK(s.fewshot_delimiter == "\n\n");
  // acc named alone still reports acc_norm beside it (both always labelled).
  const std::vector<ev::MetricSpec> m = ev::effective_metrics(s);
  REQUIRE(m.size() == 2);
  CHECK(m[0].metric == "acc");
  CHECK(m[1].metric == "acc_norm");
}

TEST_CASE("an integer target and a choice list stay typed") {
  const ev::TaskSpec t = parse(R"(task: t
dataset_path: json
dataset_kwargs: {data_files: {test: x.jsonl}}
test_split: test
output_type: multiple_choice
doc_to_text: q
doc_to_choice: ["yes", "no"]
doc_to_target: 0
)");
  CHECK(std::get<int64_t>(t.doc_to_target) == 0);
  CHECK(std::get<std::vector<std::string>>(t.doc_to_choice).size() == 2);
}

TEST_CASE("unknown and unsupported fields are refused with the field named") {
  CHECK_THROWS_WITH_AS(parse(std::string(kTask) + "process_docs: foo\n"),
                       doctest::Contains("field 'process_docs'"), patchbay::Error);
  CHECK_THROWS_WITH_AS(parse(std::string(kTask) + "doc_to_decontamination_query: x\n"),
                       doctest::Contains("field 'doc_to_decontamination_query'"), patchbay::Error);
  std::string hub = kTask;
  hub.replace(hub.find("dataset_path: json"), 18, "dataset_path: super_glue");
  CHECK_THROWS_WITH_AS(parse(hub), doctest::Contains("field 'dataset_path'"), patchbay::Error);
  std::string code = kTask;
  code.replace(code.find("doc_to_target: label"), 20, "doc_to_target: !function utils.target");
  CHECK_THROWS_WITH_AS(parse(code), doctest::Contains("!function"), patchbay::Error);
  CHECK_THROWS_WITH_AS(
      parse(std::string(kTask) + "generation_kwargs: {until: [x], do_sample: true}\n"),
      doctest::Contains("generation_kwargs.do_sample"), patchbay::Error);
  std::string f1 = kTask;
  f1.replace(f1.find("- metric: acc"), 13, "- metric: f1");
  CHECK_THROWS_WITH_AS(parse(f1), doctest::Contains("metric_list[].metric"), patchbay::Error);
  CHECK_THROWS_WITH_AS(ev::parse_task_yaml("task: [unclosed", "bad.yaml", "."),
                       doctest::Contains("bad.yaml"), patchbay::Error);
  // A scalar where the schema has a mapping (found by fuzz_task_files: yaml-cpp's BadSubscript
  // escaped as an internal error).
  std::string scalar_kwargs = kTask;
  scalar_kwargs.replace(scalar_kwargs.find("dataset_kwargs:"), 15, "dataset_kwargs: 3\nx:");
  CHECK_THROWS_AS(parse(scalar_kwargs), patchbay::Error);
  CHECK_THROWS_WITH_AS(parse(std::string(kTask) + "generation_kwargs: 7\n"),
                       doctest::Contains("generation_kwargs"), patchbay::Error);
}
