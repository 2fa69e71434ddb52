// Per-item scores and their aggregation, as lm-evaluation-harness computes them
// (api/task.py process_results, api/metrics.py, filters/extraction.py RegexFilter).
//
// multiple_choice, from the choices' log-likelihoods ll[i] (argmax: first maximum on ties):
//   acc        = [argmax ll == gold]
//   acc_norm   = [argmax ll[i] / len(choice_i) == gold]   len = Python len(str): CODE POINTS of
//                the choice without the target delimiter (lm-eval's completion_len; the same
//                as bytes for ASCII text)
//   acc_bytes  = [argmax ll[i] / utf8_bytes(choice_i) == gold]
//   exact_match = is_greedy of the gold choice
//   aggregated by mean, stderr = sample std (ddof 1) / sqrt(n)
// loglikelihood: perplexity = exp(-mean ll); acc = mean is_greedy.
// loglikelihood_rolling: word_perplexity = exp(-Σll / Σwords), byte_perplexity =
//   exp(-Σll / Σbytes), bits_per_byte = -Σll / Σbytes / ln 2 (words: re.split(r"\s+")).
// generate_until: each filter (none, or the task's regex filters) turns the generation into an
//   answer; exact_match compares it with the target after regexes_to_ignore, ignore_case,
//   ignore_punctuation (HF evaluate's exact_match). Reported as "exact_match,<filter>".
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "eval/task_spec.hpp"

namespace patchbay::eval {

struct ChoiceScores {
  int64_t pred = 0;        // argmax ll
  int64_t pred_norm = 0;   // argmax ll / code points
  int64_t pred_bytes = 0;  // argmax ll / bytes
};
ChoiceScores choose(const std::vector<double>& loglikelihoods,
                    const std::vector<std::string>& choices);

// RegexFilter.apply on one response (Python findall semantics, group_select may be negative).
std::string apply_regex_filter(const RegexFilterSpec& filter, const std::string& response);

bool exact_match(const MetricSpec& options, std::string prediction, std::string reference);

struct Aggregate {
  double value = 0;
  double stderr_value = 0;  // NaN when not defined (n < 2, or perplexity-style metrics)
};
Aggregate mean_with_stderr(const std::vector<double>& values);

}  // namespace patchbay::eval
