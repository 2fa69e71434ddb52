// A task file shaped like lm-evaluation-harness's YAML tasks, read into typed options.
//
//   task: kjv_cloze                        # name (required)
//   dataset_path: json                     # local JSON Lines only
//   dataset_kwargs: {data_files: {test: kjv_cloze.jsonl, train: kjv_cloze_train.jsonl}}
//   test_split: test   validation_split: ...   training_split: ...   fewshot_split: ...
//   output_type: multiple_choice | loglikelihood | loglikelihood_rolling | generate_until
//   doc_to_text / doc_to_target / doc_to_choice: a field name, a template (template.hpp), an
//       integer (doc_to_target) or a list (doc_to_choice)
//   description, target_delimiter (" "), fewshot_delimiter ("\n\n"), num_fewshot (0)
//   fewshot_config: {sampler: default | first_n}
//   metric_list: [{metric: acc, aggregation: mean, higher_is_better: true}, ...]
//   generation_kwargs: {until: [...], max_gen_toks: N, do_sample: false, temperature: 0}
//   filter_list: [{name: ..., filter: [{function: regex, regex_pattern: ..., group_select: 0,
//                  fallback: ...}, {function: take_first}]}]
//   repeats: 1, metadata: {...}, tag: ..., task_alias: ..., should_decontaminate: false
//
// Relative data_files are resolved against the task file's folder (lm-eval resolves them
// against the working directory; scripts/eval/check_lm_eval.sh runs it from that folder).
// Anything else — a key this reader does not know, `!function` (Python code), a
// dataset_path other than json, do_sample: true, repeats > 1 — is refused with an
// Error(kInvalidArgument) naming the file and the field.
#pragma once

#include <cstdint>
#include <filesystem>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <variant>
#include <vector>

namespace patchbay::eval {

enum class OutputType { kMultipleChoice, kLoglikelihood, kLoglikelihoodRolling, kGenerateUntil };

const char* output_type_name(OutputType type);

struct MetricSpec {
  std::string metric;  // acc, acc_norm, acc_bytes, exact_match, perplexity, word_perplexity, ...
  bool ignore_case = false;  // exact_match options (HF evaluate's)
  bool ignore_punctuation = false;
  std::vector<std::string> regexes_to_ignore;
};

struct RegexFilterSpec {
  std::string pattern;
  int64_t group_select = 0;
  std::string fallback = "[invalid]";
};

struct FilterSpec {
  std::string name;
  std::vector<RegexFilterSpec> regexes;  // applied in order; take_first is implied (repeats = 1)
};

// A doc_to_* entry: a template (or field name) string, an integer or a list of templates.
using FieldSpec = std::variant<std::monostate, std::string, int64_t, std::vector<std::string>>;

struct TaskSpec {
  std::filesystem::path file;  // the YAML file ("" for a spec built in code)
  std::string name;
  OutputType output_type = OutputType::kGenerateUntil;      // lm-eval's default
  std::map<std::string, std::filesystem::path> data_files;  // split -> JSON Lines file
  std::optional<std::string> training_split, validation_split, test_split, fewshot_split;
  FieldSpec doc_to_text, doc_to_target, doc_to_choice;
  std::string description;
  std::string target_delimiter = " ";
  std::string fewshot_delimiter = "\n\n";
  int64_t num_fewshot = 0;
  bool fewshot_first_n = false;     // fewshot_config.sampler: first_n
  std::vector<MetricSpec> metrics;  // empty: the output type's defaults
  std::vector<std::string> until;   // generate_until stop strings
  int64_t max_gen_toks = 256;       // lm-eval HF default
  std::vector<FilterSpec> filters;
  nlohmann::json metadata;
};

// Reads and checks a task file. Throws Error(kInvalidArgument) naming the file and the field
// for anything outside the supported subset; Error(kNotFound) for a missing file.
TaskSpec load_task_file(const std::filesystem::path& file);
// The same from YAML text (`origin` names it in messages; relative data files resolve against
// `base_dir`).
TaskSpec parse_task_yaml(const std::string& text, const std::string& origin,
                         const std::filesystem::path& base_dir);

// The metrics a task reports: its metric_list, or lm-eval's defaults for the output type
// (multiple_choice: acc, acc_norm; loglikelihood: perplexity, acc; rolling: word_perplexity,
// byte_perplexity, bits_per_byte; generate_until: exact_match). For multiple_choice, acc and
// acc_norm are always both reported (each labelled) even when metric_list names one.
std::vector<MetricSpec> effective_metrics(const TaskSpec& spec);

}  // namespace patchbay::eval
