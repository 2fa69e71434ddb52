// Batched log-likelihood scoring and greedy generation (request_scorer.hpp).
#include "eval/request_scorer.hpp"

#include <algorithm>
#include <cmath>
#include <map>
#include <numeric>
#include <utility>

#include "common/error.hpp"
#include "engine/autograd.hpp"

namespace patchbay::eval {
namespace {

namespace eng = patchbay::engine;

struct Row {
  std::vector<int32_t> input;
  std::vector<size_t> requests;  // requests scored from this row
};

// Σ log p(token) over the last `targets.size()` positions ending at `end` (exclusive) of one
// row of logits [T, V]; logsumexp in double so f32 rounding stays below 1e-6 per token.
LoglikelihoodResult score_row(const float* logits, int64_t vocab, int64_t end,
                              const std::vector<int32_t>& targets) {
  LoglikelihoodResult r;
  r.is_greedy = true;
  const int64_t n = static_cast<int64_t>(targets.size());
  for (int64_t k = 0; k < n; ++k) {
    const float* row = logits + (end - n + k) * vocab;
    const float* best = std::max_element(row, row + vocab);
    double sum = 0;
    for (int64_t v = 0; v < vocab; ++v) sum += std::exp(static_cast<double>(row[v]) - *best);
    const int32_t t = targets[static_cast<size_t>(k)];
    r.logprob += static_cast<double>(row[t]) - *best - std::log(sum);
    if (best - row != t) r.is_greedy = false;
  }
  return r;
}

}  // namespace

std::vector<LoglikelihoodResult> score_loglikelihood(model::LanguageModel& model,
                                                     const std::vector<TokenPair>& requests,
                                                     int64_t batch_size, ScoringStats* stats) {
  const int64_t max_length = model.options().context_length;
  const int64_t vocab = model.options().vocab_size;
  if (batch_size < 1) throw Error(ErrorKind::kInvalidArgument, "batch size must be at least 1");
  std::vector<LoglikelihoodResult> results(requests.size());
  std::map<std::vector<int32_t>, size_t> row_of_input;
  std::vector<Row> rows;
  ScoringStats s;
  s.requests = static_cast<int64_t>(requests.size());
  for (size_t i = 0; i < requests.size(); ++i) {
    const TokenPair& r = requests[i];
    if (static_cast<int64_t>(r.continuation.size()) > max_length)
      throw Error(ErrorKind::kInvalidArgument, "a continuation of " +
                                                   std::to_string(r.continuation.size()) +
                                                   " tokens is longer than the model's context (" +
                                                   std::to_string(max_length) + ")");
    std::vector<int32_t> all = r.context;
    all.insert(all.end(), r.continuation.begin(), r.continuation.end());
    const int64_t keep = std::min<int64_t>(static_cast<int64_t>(all.size()), max_length + 1);
    results[i].truncated_tokens = static_cast<int64_t>(all.size()) - keep;
    if (results[i].truncated_tokens > 0) ++s.truncated_requests;
    std::vector<int32_t> input(all.end() - keep, all.end() - 1);
    const auto [it, inserted] = row_of_input.try_emplace(std::move(input), rows.size());
    if (inserted) rows.push_back({it->first, {}});
    rows[it->second].requests.push_back(i);
  }
  // Longest first, then by tokens (lm-eval's sort key: -len(tokens), tuple(tokens)).
  std::vector<size_t> order(rows.size());
  std::iota(order.begin(), order.end(), 0);
  std::sort(order.begin(), order.end(), [&](size_t a, size_t b) {
    if (rows[a].input.size() != rows[b].input.size())
      return rows[a].input.size() > rows[b].input.size();
    return rows[a].input < rows[b].input;
  });
  eng::NoGradGuard no_grad;
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
        model.forward(batch, /*training=*/false).logits.contiguous();  // [B, T, V]
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
  s.rows = static_cast<int64_t>(rows.size());
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
  std::vector<size_t> order(prompts.size());
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(),
                   [&](size_t a, size_t b) { return encoded[a].size() > encoded[b].size(); });
  std::vector<GenerationResult> results(prompts.size());
  eng::NoGradGuard no_grad;
  for (size_t i : order) {
    std::vector<int32_t> prompt = encoded[i];
    if (prompt.empty()) {
      if (!codec.prefix_token)
        throw Error(ErrorKind::kInvalidArgument,
                    "an empty prompt and no prefix token to start from");
      prompt = {*codec.prefix_token};
    }
    GenerationResult& r = results[i];
    if (static_cast<int64_t>(prompt.size()) > max_ctx) {
      r.truncated_tokens = static_cast<int64_t>(prompt.size()) - max_ctx;
      prompt.erase(prompt.begin(), prompt.begin() + r.truncated_tokens);
    }
    model::DecodeState state =
        model.start_decoding(1, static_cast<int64_t>(prompt.size()) + max_gen_toks);
    eng::Tensor logits = model.decode_step(
        state, eng::Tensor::from_data(prompt.data(), {1, static_cast<int64_t>(prompt.size())},
                                      eng::DType::kI32));
    std::vector<int32_t> generated;
    const int64_t vocab = model.options().vocab_size;
    for (int64_t step = 0; step < max_gen_toks; ++step) {
      const eng::Tensor last = logits.contiguous();
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
      if (step + 1 < max_gen_toks)
        logits = model.decode_step(state, eng::Tensor::from_data(&token, {1, 1}, eng::DType::kI32));
    }
    r.tokens = static_cast<int64_t>(generated.size());
    r.text = codec.decode(generated);
    size_t cut = r.text.size();
    for (const std::string& u : until)
      if (!u.empty()) cut = std::min(cut, r.text.find(u));
    r.text.resize(cut);
  }
  return results;
}

}  // namespace patchbay::eval
