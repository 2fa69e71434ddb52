// A task's documents turned into prompts, the way lm-evaluation-harness's ConfigurableTask
// builds them (api/task.py fewshot_context / build_qa_turn / construct_requests):
//
//   prompt = description
//          + for each few-shot doc:  text + target_delimiter + answer + fewshot_delimiter
//          + text                                       (the evaluated doc, no delimiter)
//   multiple_choice:        one request per choice: (prompt, target_delimiter + choice)
//   loglikelihood:          (prompt, target)            (no delimiter added, as lm-eval)
//   loglikelihood_rolling:  the target text alone
//   generate_until:         prompt, then greedy decoding until a stop string
//
// Evaluated docs: test_split, else validation_split. Few-shot docs: fewshot_split, else
// training_split, else validation_split, else test_split. Few-shot examples are drawn with
// Python's Random(seed).sample (python_random.hpp; lm-eval's default seed 1234), one generator
// per task advanced doc by doc in order; when fewshot_split equals test_split (both unset
// counts as equal, as in lm-eval) n+1 are drawn and the evaluated doc removed. The first_n
// sampler takes the pool's first n docs instead.
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "eval/task_spec.hpp"

namespace patchbay::eval {

struct TaskItem {
  int64_t doc_id = 0;  // index in the evaluated split
  nlohmann::json doc;
  std::string prompt;                      // few-shot examples + the doc's text ("" for rolling)
  std::vector<std::string> choices;        // multiple_choice: doc_to_choice, without delimiter
  std::vector<std::string> continuations;  // what is scored after the prompt, one per request
  std::vector<int64_t> gold;               // multiple_choice: index(es) of the right choice(s)
  std::vector<std::string> gold_text;      // generate_until / loglikelihood / rolling: target(s)
};

struct TaskRequests {
  TaskSpec spec;
  int64_t num_fewshot = 0;
  uint64_t fewshot_seed = 1234;
  std::string eval_split;
  std::vector<TaskItem> items;
};

// Reads the JSON Lines files a spec names (each line one JSON object) and builds the items.
// `num_fewshot` overrides the spec's; `limit` keeps the first N evaluated docs (the few-shot
// generator advances over those only, as lm-eval's --limit). Throws Error(kInvalidArgument)
// naming the task, the doc and the field for: an unreadable line, an empty choice list, an
// answer index out of range (lm-eval only warns and scores the doc wrong), a template error,
// a doc_to_text giving an integer (multiple-input tasks are not supported), too few few-shot docs.
TaskRequests build_task_requests(const TaskSpec& spec, std::optional<int64_t> num_fewshot,
                                 std::optional<int64_t> limit, uint64_t fewshot_seed = 1234);

// Reads one JSON Lines file (errors name the file and line).
std::vector<nlohmann::json> read_json_lines(const std::filesystem::path& file);

}  // namespace patchbay::eval
