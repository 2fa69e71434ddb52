// Σ log p(token) over a continuation's tokens from rows of logits, shared by the causal scorer
// (request_scorer.cpp) and the encoder-decoder one (seq2seq_request_scorer.cpp): logsumexp in
// double so f32 rounding stays below 1e-6 per token; is_greedy = every token is the argmax at
// its position (the first maximum on ties, as torch.argmax).
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <vector>

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

}  // namespace patchbay::eval
