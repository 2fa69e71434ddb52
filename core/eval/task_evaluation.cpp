// evaluate_task: the phases of task_evaluation.hpp, one function per output type.
#include "eval/task_evaluation.hpp"

#include <chrono>
#include <cmath>
#include <cstdio>
#include <limits>
#include <map>
#include <sstream>

#include "common/error.hpp"
#include "eval/answer_metrics.hpp"
#include "eval/seq2seq_request_scorer.hpp"
#include "eval/task_docs.hpp"

namespace patchbay::eval {
namespace {

using json = nlohmann::json;
constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();

// An encoder-decoder scores through the seq2seq scorer (seq2seq_request_scorer.hpp), with the
// codec's decoder start token; a single-stack model through score_loglikelihood.
int32_t decoder_start(const TextCodec& codec, const TaskRequests& r) {
  if (!codec.decoder_start_token)
    throw Error(ErrorKind::kInvalidArgument,
                "task " + r.spec.name +
                    ": the model is an encoder-decoder and the tokenizer has no \"<pad>\" special "
                    "token to start its decoder with (train.objective = \"seq2seq\" or "
                    "\"span_corruption\" add it)");
  return *codec.decoder_start_token;
}

std::vector<LoglikelihoodResult> score_pairs(model::LanguageModel& model, const TextCodec& codec,
                                             const TaskRequests& r,
                                             const std::vector<TokenPair>& pairs,
                                             const EvalOptions& options, ScoringStats& stats) {
  if (model::EncoderDecoderModel* seq2seq = model.encoder_decoder())
    return score_loglikelihood_seq2seq(*seq2seq, decoder_start(codec, r), pairs, options.batch_size,
                                       &stats);
  return score_loglikelihood(model, pairs, options.batch_size, &stats, options.share_contexts);
}

std::string request_name(const TaskRequests& r, const TaskItem& item, size_t k) {
  return "task " + r.spec.name + ", doc " + std::to_string(item.doc_id) +
         (r.spec.output_type == OutputType::kMultipleChoice ? ", choice " + std::to_string(k) : "");
}

void score_choices(model::LanguageModel& model, const TextCodec& codec, const TaskRequests& r,
                   const EvalOptions& options, TaskResult& out) {
  const std::vector<MetricSpec> metrics = effective_metrics(r.spec);
  std::vector<TokenPair> pairs;
  for (const TaskItem& item : r.items)
    for (size_t k = 0; k < item.continuations.size(); ++k) {
      pairs.push_back(
          model.encoder_decoder() != nullptr
              ? encode_pair_separately(codec, item.prompt, item.continuations[k],
                                       request_name(r, item, k))
              : encode_pair(codec, item.prompt, item.continuations[k], request_name(r, item, k)));
      if (pairs.back().boundary_mismatch) ++out.boundary_mismatches;
      if (static_cast<int64_t>(pairs.back().continuation.size()) > model.options().context_length)
        throw Error(ErrorKind::kInvalidArgument,
                    request_name(r, item, k) + ": the continuation has " +
                        std::to_string(pairs.back().continuation.size()) +
                        " tokens, more than the model's context of " +
                        std::to_string(model.options().context_length) +
                        " (lm-eval refuses it too); shorten the task's choices or use a model with "
                        "a longer context");
    }
  const std::vector<LoglikelihoodResult> scores =
      score_pairs(model, codec, r, pairs, options, out.scoring);
  out.truncated_requests = out.scoring.truncated_requests;
  std::map<std::string, std::vector<double>> per_metric;
  size_t next = 0;
  for (const TaskItem& item : r.items) {
    std::vector<double> ll;
    std::vector<bool> greedy;
    for (size_t k = 0; k < item.continuations.size(); ++k, ++next) {
      ll.push_back(scores[next].logprob);
      greedy.push_back(scores[next].is_greedy);
    }
    json sample = {{"doc_id", item.doc_id}, {"doc", item.doc},
                   {"prompt", item.prompt}, {"continuations", item.continuations},
                   {"loglikelihoods", ll},  {"is_greedy", greedy}};
    if (r.spec.output_type == OutputType::kLoglikelihood) {
      per_metric["perplexity"].push_back(ll[0]);
      per_metric["acc"].push_back(greedy[0] ? 1.0 : 0.0);
      sample["target"] = item.gold_text[0];
    } else {
      const ChoiceScores c = choose(ll, item.choices);
      auto hit = [&](int64_t pred) {
        return std::find(item.gold.begin(), item.gold.end(), pred) != item.gold.end() ? 1.0 : 0.0;
      };
      per_metric["acc"].push_back(hit(c.pred));
      per_metric["acc_norm"].push_back(hit(c.pred_norm));
      per_metric["acc_bytes"].push_back(hit(c.pred_bytes));
      double em = 0;
      for (int64_t g : item.gold) em = std::max(em, greedy[static_cast<size_t>(g)] ? 1.0 : 0.0);
      per_metric["exact_match"].push_back(em);
      sample["choices"] = item.choices;
      sample["gold"] = item.gold;
      sample["prediction"] = c.pred;
      sample["prediction_norm"] = c.pred_norm;
      sample["acc"] = hit(c.pred);
      sample["acc_norm"] = hit(c.pred_norm);
    }
    if (options.keep_samples) out.samples.push_back(std::move(sample));
  }
  for (const MetricSpec& m : metrics) {
    const std::vector<double>& values = per_metric[m.metric];
    if (m.metric == "perplexity") {
      const Aggregate a = mean_with_stderr(values);
      out.metrics.push_back({"perplexity", std::exp(-a.value), kNaN});
    } else {
      const Aggregate a = mean_with_stderr(values);
      out.metrics.push_back({m.metric, a.value, a.stderr_value});
    }
  }
}

void score_rolling(model::LanguageModel& model, const TextCodec& codec, const TaskRequests& r,
                   const EvalOptions& options, TaskResult& out) {
  if (!codec.prefix_token)
    throw Error(ErrorKind::kInvalidArgument,
                "task " + r.spec.name +
                    ": loglikelihood_rolling needs a special token to start "
                    "each document (lm-eval's prefix token); this tokenizer has none");
  std::vector<TokenPair> windows;
  std::vector<size_t> owner;
  for (size_t i = 0; i < r.items.size(); ++i)
    for (TokenPair& w : rolling_windows(codec.encode(r.items[i].gold_text[0]), *codec.prefix_token,
                                        model.options().context_length)) {
      windows.push_back(std::move(w));
      owner.push_back(i);
    }
  const std::vector<LoglikelihoodResult> scores =
      score_pairs(model, codec, r, windows, options, out.scoring);
  std::vector<double> ll(r.items.size(), 0.0);
  for (size_t w = 0; w < windows.size(); ++w) ll[owner[w]] += scores[w].logprob;
  double total = 0, words = 0, bytes = 0;
  for (size_t i = 0; i < r.items.size(); ++i) {
    const std::string& text = r.items[i].gold_text[0];
    total += ll[i];
    words += static_cast<double>(count_words(text));
    bytes += static_cast<double>(text.size());
    if (options.keep_samples)
      out.samples.push_back({{"doc_id", r.items[i].doc_id},
                             {"doc", r.items[i].doc},
                             {"text", text},
                             {"loglikelihood", ll[i]},
                             {"words", count_words(text)},
                             {"bytes", text.size()}});
  }
  for (const MetricSpec& m : effective_metrics(r.spec)) {
    double v = kNaN;
    if (m.metric == "word_perplexity")
      v = std::exp(-total / words);
    else if (m.metric == "byte_perplexity")
      v = std::exp(-total / bytes);
    else if (m.metric == "bits_per_byte")
      v = -total / bytes / std::log(2.0);
    else
      throw Error(ErrorKind::kInvalidArgument, "task " + r.spec.name + ": metric " + m.metric +
                                                   " does not apply to loglikelihood_rolling");
    out.metrics.push_back({m.metric, v, kNaN});
  }
}

void score_generations(model::LanguageModel& model, const TextCodec& codec, const TaskRequests& r,
                       const EvalOptions& options, TaskResult& out) {
  std::vector<std::string> prompts;
  for (const TaskItem& item : r.items) prompts.push_back(item.prompt);
  const std::vector<std::string> until =
      r.spec.until.empty() ? std::vector<std::string>{r.spec.fewshot_delimiter} : r.spec.until;
  model::EncoderDecoderModel* seq2seq = model.encoder_decoder();
  const std::vector<GenerationResult> generations =
      seq2seq != nullptr ? generate_until_seq2seq(*seq2seq, decoder_start(codec, r), codec, prompts,
                                                  until, r.spec.max_gen_toks)
                         : generate_until(model, codec, prompts, until, r.spec.max_gen_toks);
  out.scoring.requests = static_cast<int64_t>(prompts.size());
  for (const GenerationResult& g : generations) out.scoring.tokens += g.tokens;  // generated tokens
  std::vector<FilterSpec> filters = r.spec.filters;
  if (filters.empty()) filters.push_back({"none", {}});
  const std::vector<MetricSpec> metrics = effective_metrics(r.spec);
  std::map<std::string, std::vector<double>> per_metric;
  for (size_t i = 0; i < r.items.size(); ++i) {
    const TaskItem& item = r.items[i];
    if (generations[i].truncated_tokens > 0) ++out.truncated_requests;
    json sample = {{"doc_id", item.doc_id},
                   {"doc", item.doc},
                   {"prompt", item.prompt},
                   {"generation", generations[i].text},
                   {"target", item.gold_text}};
    for (const FilterSpec& f : filters) {
      std::string answer = generations[i].text;
      for (const RegexFilterSpec& regex : f.regexes) answer = apply_regex_filter(regex, answer);
      sample["filtered"][f.name] = answer;
      for (const MetricSpec& m : metrics) {
        if (m.metric != "exact_match")
          throw Error(ErrorKind::kInvalidArgument, "task " + r.spec.name + ": metric " + m.metric +
                                                       " does not apply to generate_until");
        double score = 0;
        for (const std::string& g : item.gold_text)
          score = std::max(score, exact_match(m, answer, g) ? 1.0 : 0.0);
        per_metric[m.metric + "," + f.name].push_back(score);
      }
    }
    if (options.keep_samples) out.samples.push_back(std::move(sample));
  }
  for (const auto& [name, values] : per_metric) {
    const Aggregate a = mean_with_stderr(values);
    out.metrics.push_back({name, a.value, a.stderr_value});
  }
}

std::string format_number(double v) {
  if (std::isnan(v)) return "";
  char buffer[32];
  std::snprintf(buffer, sizeof(buffer), std::fabs(v) < 1e5 ? "%.4f" : "%.4g",
                v);  // perplexities can be huge
  return buffer;
}

}  // namespace

TaskResult evaluate_task(model::LanguageModel& model, const TextCodec& codec, const TaskSpec& spec,
                         const EvalOptions& options) {
  const auto start = std::chrono::steady_clock::now();
  TaskResult out = evaluate_task_requests(
      model, codec,
      build_task_requests(spec, options.num_fewshot, options.limit, options.fewshot_seed), options);
  out.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  return out;
}

TaskResult evaluate_task_requests(model::LanguageModel& model, const TextCodec& codec,
                                  const TaskRequests& requests, const EvalOptions& options) {
  const auto start = std::chrono::steady_clock::now();
  const TaskSpec& spec = requests.spec;
  TaskResult out;
  out.task = spec.name;
  out.file = spec.file.string();
  out.output_type = spec.output_type;
  out.num_fewshot = requests.num_fewshot;
  out.items = static_cast<int64_t>(requests.items.size());
  switch (spec.output_type) {
    case OutputType::kMultipleChoice:
    case OutputType::kLoglikelihood:
      score_choices(model, codec, requests, options, out);
      break;
    case OutputType::kLoglikelihoodRolling:
      score_rolling(model, codec, requests, options, out);
      break;
    case OutputType::kGenerateUntil:
      score_generations(model, codec, requests, options, out);
      break;
  }
  out.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  return out;
}

json task_result_json(const TaskResult& r) {
  json metrics = json::object();
  for (const MetricResult& m : r.metrics) {
    metrics[m.name] = m.value;
    if (!std::isnan(m.stderr_value)) metrics[m.name + "_stderr"] = m.stderr_value;
  }
  return {{"task", r.task},
          {"file", r.file},
          {"output_type", output_type_name(r.output_type)},
          {"num_fewshot", r.num_fewshot},
          {"items", r.items},
          {"metrics", metrics},
          {"truncated_requests", r.truncated_requests},
          {"boundary_mismatches", r.boundary_mismatches},
          {"requests", r.scoring.requests},
          {"rows", r.scoring.rows},
          {"shared_contexts", r.scoring.shared_contexts},
          {"batches", r.scoring.batches},
          {"tokens", r.scoring.tokens},
          {"seconds", r.seconds}};
}

std::string results_table(const std::vector<TaskResult>& results) {
  std::ostringstream out;
  char line[256];
  std::snprintf(line, sizeof(line), "%-24s %6s  %-28s %9s  %9s %7s\n", "task", "shots", "metric",
                "value", "± stderr", "items");
  out << line;
  for (const TaskResult& r : results)
    for (const MetricResult& m : r.metrics) {
      std::snprintf(line, sizeof(line), "%-24s %6lld  %-28s %9s  %9s %7lld\n", r.task.c_str(),
                    static_cast<long long>(r.num_fewshot), m.name.c_str(),
                    format_number(m.value).c_str(), format_number(m.stderr_value).c_str(),
                    static_cast<long long>(r.items));
      out << line;
    }
  return out.str();
}

}  // namespace patchbay::eval
