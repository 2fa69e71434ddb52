// Σ log p(token) over a continuation's tokens from rows of logits, shared by the causal scorer
// (request_scorer.cpp) and the encoder-decoder one (seq2seq_request_scorer.cpp): logsumexp in
// double so f32 rounding stays below 1e-6 per token; is_greedy = every token is the argmax at
// its position (the first maximum on ties, as torch.argmax). Also what both do to greedy
// generation requests: the order (longest prompt first, as lm-eval) and the prompt's ids.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <numeric>
#include <optional>
#include <string>
#include <vector>

#include "common/error.hpp"
#include "eval/request_scorer.hpp"

namespace patchbay::eval {

// The distribution of target k is the row of `vocab` floats at logits_at(k).
template <typename LogitsAt>
LoglikelihoodResult score_targets(int64_t vocab, const std::vector<int32_t>& targets,
                                  LogitsAt logits_at) {
  LoglikelihoodResult r;
  r.is_greedy = true;
  for (size_t k = 0; k < targets.size(); ++k) {
    const float* row = logits_at(static_cast<int64_t>(k));
    const float* best = std::max_element(row, row + vocab);
    double sum = 0;
    for (int64_t v = 0; v < vocab; ++v) sum += std::exp(static_cast<double>(row[v]) - *best);
    const int32_t t = targets[k];
    r.logprob += static_cast<double>(row[t]) - *best - std::log(sum);
    if (best - row != t) r.is_greedy = false;
  }
  return r;
}

// Indices of `encoded` from the longest to the shortest (ties keep their order).
inline std::vector<size_t> longest_first(const std::vector<std::vector<int32_t>>& encoded) {
  std::vector<size_t> order(encoded.size());
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(),
                   [&](size_t a, size_t b) { return encoded[a].size() > encoded[b].size(); });
  return order;
}

// A generation prompt's ids: an empty prompt becomes the prefix token (refused without one:
// "an empty prompt and no prefix token " + `purpose`); one longer than `limit` keeps its last
// `limit` ids, the cut counted in `truncated`.
inline std::vector<int32_t> generation_prompt(std::vector<int32_t> ids,
                                              const std::optional<int32_t>& prefix_token,
                                              int64_t limit, int64_t& truncated,
                                              const std::string& purpose) {
  if (ids.empty()) {
    if (!prefix_token)
      throw Error(ErrorKind::kInvalidArgument, "an empty prompt and no prefix token " + purpose);
    ids = {*prefix_token};
  }
  if (static_cast<int64_t>(ids.size()) > limit) {
    truncated = static_cast<int64_t>(ids.size()) - limit;
    ids.erase(ids.begin(), ids.begin() + truncated);
  }
  return ids;
}

}  // namespace patchbay::eval
