// Batched log-likelihood scoring and greedy generation (request_scorer.hpp).
#include "eval/request_scorer.hpp"

#include <algorithm>
#include <cmath>
#include <map>
#include <numeric>
#include <optional>
#include <utility>

#include "common/error.hpp"
#include "engine/autograd.hpp"
#include "engine/device.hpp"
#include "eval/target_scoring.hpp"

namespace patchbay::eval {
namespace {

namespace eng = patchbay::engine;

struct Row {
  std::vector<int32_t> input;
  std::vector<size_t> requests;  // requests scored from this row
};

// Requests that share one context, scored from one prefill of it (see the header).
struct ContextGroup {
  const std::vector<int32_t>* context = nullptr;
  std::vector<size_t> requests;
};

// Σ log p over the last `targets.size()` positions ending at `end` (exclusive) of one row of
// logits [T, V].
LoglikelihoodResult score_row(const float* logits, int64_t vocab, int64_t end,
                              const std::vector<int32_t>& targets) {
  const int64_t n = static_cast<int64_t>(targets.size());
  return score_targets(vocab, targets, [&](int64_t k) { return logits + (end - n + k) * vocab; });
}

eng::Tensor host_logits(const eng::Tensor& logits) { return logits.to(eng::cpu()).contiguous(); }

// Rows of whole inputs, longest first, `batch_size` per forward (the path without a shared
// context).
void score_rows(model::LanguageModel& model, const std::vector<TokenPair>& requests,
                std::vector<Row>& rows, int64_t batch_size,
                std::vector<LoglikelihoodResult>& results, ScoringStats& s) {
  const int64_t vocab = model.options().vocab_size;
  // Longest first, then by tokens (lm-eval's sort key: -len(tokens), tuple(tokens)).
  std::vector<size_t> order(rows.size());
  std::iota(order.begin(), order.end(), 0);
  std::sort(order.begin(), order.end(), [&](size_t a, size_t b) {
    if (rows[a].input.size() != rows[b].input.size())
      return rows[a].input.size() > rows[b].input.size();
    return rows[a].input < rows[b].input;
  });
  for (size_t start = 0; start < order.size(); start += static_cast<size_t>(batch_size)) {
    const size_t count = std::min(order.size() - start, static_cast<size_t>(batch_size));
    const int64_t width = static_cast<int64_t>(rows[order[start]].input.size());
    std::vector<int32_t> tokens(count * static_cast<size_t>(width), 0);  // right padding
    for (size_t b = 0; b < count; ++b) {
      const std::vector<int32_t>& in = rows[order[start + b]].input;
      std::copy(in.begin(), in.end(),
                tokens.begin() + static_cast<std::ptrdiff_t>(b * static_cast<size_t>(width)));
      s.tokens += static_cast<int64_t>(in.size());
    }
    const eng::Tensor batch = eng::Tensor::from_data(
        tokens.data(), {static_cast<int64_t>(count), width}, eng::DType::kI32);
    const eng::Tensor logits =
        host_logits(model.forward(batch, /*training=*/false).logits);  // [B, T, V]
    const float* data = logits.data<float>();
    // Log-softmax at the continuation positions, one (row, request) per iteration across the
    // cores: with a 50K vocabulary and rolling windows (every position scored) this is as much
    // work as a small model's forward. Each iteration writes its own results[i].
    std::vector<std::pair<size_t, size_t>> work;  // (row in batch, request)
    for (size_t b = 0; b < count; ++b)
      for (size_t i : rows[order[start + b]].requests) work.emplace_back(b, i);
#pragma omp parallel for schedule(dynamic)
    for (size_t w = 0; w < work.size(); ++w) {
      const auto [b, i] = work[w];
      const Row& row = rows[order[start + b]];
      const float* row_logits = data + b * static_cast<size_t>(width * vocab);
      const int64_t truncated = results[i].truncated_tokens;
      results[i] = score_row(row_logits, vocab, static_cast<int64_t>(row.input.size()),
                             requests[i].continuation);
      results[i].truncated_tokens = truncated;
    }
    ++s.batches;
  }
}

// One shared context: prefilled once in a batch-1 decoding state (its last logits give every
// continuation's first token), then the state forked into one sequence per distinct
// continuation longer than one token, which decode their tokens but the last (right-padded).
// Returns false, having scored nothing, when the model's layers cannot fork a state.
bool score_shared_context(model::LanguageModel& model, const std::vector<TokenPair>& requests,
                          const ContextGroup& group, std::vector<LoglikelihoodResult>& results,
                          ScoringStats& s) {
  const int64_t vocab = model.options().vocab_size;
  const std::vector<int32_t>& context = *group.context;
  const int64_t context_length = static_cast<int64_t>(context.size());
  // Distinct continuations that need positions past the context: one forked sequence each.
  std::map<std::vector<int32_t>, int64_t> sequence_of;
  int64_t width = 0;  // tokens each forked sequence decodes (the longest continuation - 1)
  for (size_t i : group.requests) {
    const std::vector<int32_t>& c = requests[i].continuation;
    if (c.size() < 2) continue;
    sequence_of.try_emplace(c, static_cast<int64_t>(sequence_of.size()));
    width = std::max(width, static_cast<int64_t>(c.size()) - 1);
  }
  model::DecodeState state;
  try {
    state = model.start_decoding(1, context_length + width);
  } catch (const Error&) {
    return false;  // a layer without a decoding state (cache kind NONE): whole rows instead
  }
  // Only the context's last position scores anything: the head runs there alone.
  const eng::Tensor first = host_logits(model.decode_step(
      state, eng::Tensor::from_data(context.data(), {1, context_length}, eng::DType::kI32), 1));
  const float* next_of_context = first.data<float>();
  eng::Tensor rest;  // [N, width, V]: logits after each continuation's first width tokens
  const int64_t sequences = static_cast<int64_t>(sequence_of.size());
  if (sequences > 0) {
    const std::vector<int64_t> source(static_cast<size_t>(sequences), 0);
    std::optional<model::DecodeState> forked = model.fork_decoding(state, source);
    if (!forked) return false;
    std::vector<int32_t> tokens(static_cast<size_t>(sequences * width), 0);  // right padding
    for (const auto& [c, n] : sequence_of) {
      std::copy(c.begin(), c.end() - 1, tokens.begin() + n * width);
      s.tokens += static_cast<int64_t>(c.size()) - 1;
    }
    rest = host_logits(model.decode_step(
        *forked, eng::Tensor::from_data(tokens.data(), {sequences, width}, eng::DType::kI32)));
  }
  s.tokens += context_length;
  s.rows += 1 + sequences;
  ++s.batches;
  ++s.shared_contexts;
  const float* rest_data = sequences > 0 ? rest.data<float>() : nullptr;
  const std::vector<size_t>& members = group.requests;
#pragma omp parallel for schedule(dynamic)
  for (size_t m = 0; m < members.size(); ++m) {
    const size_t i = members[m];
    const std::vector<int32_t>& c = requests[i].continuation;
    const float* row = nullptr;
    if (c.size() >= 2) row = rest_data + sequence_of.at(c) * width * vocab;
    // Token 0 after the context's last position, token k >= 1 after continuation token k - 1.
    results[i] = score_targets(
        vocab, c, [&](int64_t k) { return k == 0 ? next_of_context : row + (k - 1) * vocab; });
  }
  return true;
}

// Whether a shared prefill saves enough to pay for its two small decoding calls: the tokens it
// forwards (the context once, each distinct continuation but its last token) at most 3/4 of
// what whole rows forward (each distinct input row). A short context with long choices
// (wordnet_definitions' "word:") goes to whole rows, which batch better.
bool worth_sharing(const std::vector<TokenPair>& requests, const std::vector<int32_t>& context,
                   const ContextGroup& group) {
  std::map<std::vector<int32_t>, bool> distinct;
  for (size_t i : group.requests) distinct.emplace(requests[i].continuation, true);
  const int64_t context_tokens = static_cast<int64_t>(context.size());
  int64_t shared = context_tokens, whole = 0;
  bool one_token_row = false;  // every one-token continuation reads the context's row alone
  for (const auto& [c, unused] : distinct) {
    const int64_t n = static_cast<int64_t>(c.size());
    shared += n - 1;
    if (n > 1)
      whole += context_tokens + n - 1;
    else
      one_token_row = true;
  }
  if (one_token_row) whole += context_tokens;
  return 4 * shared <= 3 * whole;
}

}  // namespace

std::vector<LoglikelihoodResult> score_loglikelihood(model::LanguageModel& model,
                                                     const std::vector<TokenPair>& requests,
                                                     int64_t batch_size, ScoringStats* stats,
                                                     bool share_contexts) {
  const int64_t max_length = model.options().context_length;
  if (batch_size < 1) throw Error(ErrorKind::kInvalidArgument, "batch size must be at least 1");
  std::vector<LoglikelihoodResult> results(requests.size());
  ScoringStats s;
  s.requests = static_cast<int64_t>(requests.size());
  // Requests whose context is shared (two or more, nothing cut from the left) go to the
  // shared-context path; the rest to whole rows.
  std::map<std::vector<int32_t>, ContextGroup> groups;
  std::vector<bool> in_group(requests.size(), false);
  for (size_t i = 0; i < requests.size(); ++i) {
    const TokenPair& r = requests[i];
    if (static_cast<int64_t>(r.continuation.size()) > max_length)
      throw Error(ErrorKind::kInvalidArgument, "a continuation of " +
                                                   std::to_string(r.continuation.size()) +
                                                   " tokens is longer than the model's context (" +
                                                   std::to_string(max_length) + ")");
    const int64_t total = static_cast<int64_t>(r.context.size() + r.continuation.size());
    results[i].truncated_tokens = std::max<int64_t>(0, total - (max_length + 1));
    if (results[i].truncated_tokens > 0) ++s.truncated_requests;
    if (share_contexts && results[i].truncated_tokens == 0 && !r.context.empty() &&
        !r.continuation.empty())
      groups[r.context].requests.push_back(i);
  }
  eng::NoGradGuard no_grad;
  bool can_fork = share_contexts;
  for (auto& [context, group] : groups) {
    if (group.requests.size() < 2 || !can_fork || !worth_sharing(requests, context, group))
      continue;
    group.context = &context;
    can_fork = score_shared_context(model, requests, group, results, s);
    if (can_fork)
      for (size_t i : group.requests) in_group[i] = true;
  }
  std::map<std::vector<int32_t>, size_t> row_of_input;
  std::vector<Row> rows;
  for (size_t i = 0; i < requests.size(); ++i) {
    if (in_group[i]) continue;
    const TokenPair& r = requests[i];
    std::vector<int32_t> all = r.context;
    all.insert(all.end(), r.continuation.begin(), r.continuation.end());
    const int64_t keep = static_cast<int64_t>(all.size()) - results[i].truncated_tokens;
    std::vector<int32_t> input(all.end() - keep, all.end() - 1);
    const auto [it, inserted] = row_of_input.try_emplace(std::move(input), rows.size());
    if (inserted) rows.push_back({it->first, {}});
    rows[it->second].requests.push_back(i);
  }
  score_rows(model, requests, rows, batch_size, results, s);
  s.rows += static_cast<int64_t>(rows.size());
  if (stats != nullptr) *stats = s;
  return results;
}

std::vector<GenerationResult> generate_until(model::LanguageModel& model, const TextCodec& codec,
                                             const std::vector<std::string>& prompts,
                                             const std::vector<std::string>& until,
                                             int64_t max_gen_toks) {
  const int64_t max_length = model.options().context_length;
  if (max_gen_toks >= max_length)
    throw Error(ErrorKind::kInvalidArgument,
                "generation_kwargs.max_gen_toks = " + std::to_string(max_gen_toks) +
                    " leaves no room for the prompt in the model's context of " +
                    std::to_string(max_length) + " tokens; lower it");
  const int64_t max_ctx = max_length - max_gen_toks;
  std::vector<std::vector<int32_t>> encoded(prompts.size());
  for (size_t i = 0; i < prompts.size(); ++i) encoded[i] = codec.encode(prompts[i]);
  const std::vector<size_t> order = longest_first(encoded);
  std::vector<GenerationResult> results(prompts.size());
  eng::NoGradGuard no_grad;
  for (size_t i : order) {
    GenerationResult& r = results[i];
    const std::vector<int32_t> prompt = generation_prompt(encoded[i], codec.prefix_token, max_ctx,
                                                          r.truncated_tokens, "to start from");
    model::DecodeState state =
        model.start_decoding(1, static_cast<int64_t>(prompt.size()) + max_gen_toks);
    eng::Tensor logits = model.decode_step(
        state,
        eng::Tensor::from_data(prompt.data(), {1, static_cast<int64_t>(prompt.size())},
                               eng::DType::kI32),
        1);  // the prompt's last position alone: the head skips the others
    const int64_t truncated = r.truncated_tokens;
    r = greedy_until(
        codec, until, max_gen_toks, model.options().vocab_size, logits, [&](int32_t token) {
          return model.decode_step(state, eng::Tensor::from_data(&token, {1, 1}, eng::DType::kI32));
        });
    r.truncated_tokens = truncated;
  }
  return results;
}

GenerationResult greedy_until(const TextCodec& codec, const std::vector<std::string>& until,
                              int64_t max_new, int64_t vocab, eng::Tensor logits,
                              const std::function<eng::Tensor(int32_t)>& next) {
  std::vector<int32_t> generated;
  for (int64_t step = 0; step < max_new; ++step) {
    const eng::Tensor last = host_logits(logits);
    const float* row = last.data<float>() + (last.size(1) - 1) * vocab;
    const int32_t token = static_cast<int32_t>(std::max_element(row, row + vocab) - row);
    if (std::find(codec.stop_tokens.begin(), codec.stop_tokens.end(), token) !=
        codec.stop_tokens.end())
      break;
    generated.push_back(token);
    const std::string text = codec.decode(generated);
    if (std::any_of(until.begin(), until.end(), [&](const std::string& u) {
          return !u.empty() && text.find(u) != std::string::npos;
        }))
      break;
    if (step + 1 < max_new) logits = next(token);
  }
  GenerationResult r;
  r.tokens = static_cast<int64_t>(generated.size());
  r.text = codec.decode(generated);
  size_t cut = r.text.size();
  for (const std::string& u : until)
    if (!u.empty()) cut = std::min(cut, r.text.find(u));
  r.text.resize(cut);
  return r;
}

}  // namespace patchbay::eval
