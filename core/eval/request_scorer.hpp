// Scoring token requests on a language model, as lm-evaluation-harness's HF backend does
// (models/huggingface.py _loglikelihood_tokens, generate_until), batched:
//
//   input  = (context + continuation)[-(L+1):][:-1]      L = the model's context length;
//            tokens cut from the left are counted (truncated_tokens)
//   logits = model(input rows padded on the right)        [B, T, V]; causal, so padding after
//            a row's end changes nothing before it
//   logprob = Σ log_softmax(logits)[pos, token] over the continuation's positions
//   is_greedy = every continuation token is the argmax at its position (first max on ties)
//
// Shared contexts (share_contexts, the default): two or more requests with the same context
// tokens (the choices of a multiple-choice item; nothing cut from the left) are scored from
// one prefill of the context in a batch-1 decoding state — its last logits score every
// continuation's first token — forked (LanguageModel::fork_decoding, attention interface 1.4)
// into one sequence per distinct continuation longer than one token, which decodes that
// continuation's tokens but the last in one step (right-padded). The context is computed once
// instead of once per choice; the log-likelihoods equal whole-row scoring up to rounding
// (tested within 1e-5). A group is shared only when that forwards at most 3/4 of the tokens
// whole rows would (a short context with long choices batches better as rows); when a layer
// cannot fork its state (or has none), those requests go to whole rows.
// Whole rows (the rest): sorted longest first (then by tokens), as lm-eval's Collator, and cut
// into batches of `batch_size` rows. Requests whose input rows are equal share one row
// (lm-eval's group_by="contexts" cache); the result is the same as scoring each alone.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "eval/token_requests.hpp"
#include "model/language_model.hpp"

namespace patchbay::eval {

struct LoglikelihoodResult {
  double logprob = 0;
  bool is_greedy = false;
  int64_t truncated_tokens = 0;  // context tokens cut from the left to fit the model
};

struct ScoringStats {
  int64_t requests = 0;
  int64_t rows = 0;  // distinct input rows forwarded (a shared context: 1 + its forked sequences)
  int64_t batches = 0;
  int64_t tokens = 0;  // tokens forwarded (padding excluded)
  int64_t truncated_requests = 0;
  int64_t shared_contexts = 0;  // contexts prefilled once for several requests
};

// Throws Error(kInvalidArgument) for a continuation longer than the model's context.
std::vector<LoglikelihoodResult> score_loglikelihood(model::LanguageModel& model,
                                                     const std::vector<TokenPair>& requests,
                                                     int64_t batch_size,
                                                     ScoringStats* stats = nullptr,
                                                     bool share_contexts = true);

struct GenerationResult {
  std::string text;  // cut at the first stop string
  int64_t tokens = 0;
  int64_t truncated_tokens = 0;  // prompt tokens cut from the left (to L - max_gen_toks)
};

// Greedy decoding through the KV cache, one prompt at a time (longest first): the prompt is
// left-truncated to L - max_gen_toks tokens (lm-eval: max_ctx_len), decoding stops at a stop
// token (EOS), after max_gen_toks tokens, or once the text contains a stop string; the text is
// cut at the first stop string. Needs L > max_gen_toks (Error(kInvalidArgument) otherwise).
std::vector<GenerationResult> generate_until(model::LanguageModel& model, const TextCodec& codec,
                                             const std::vector<std::string>& prompts,
                                             const std::vector<std::string>& until,
                                             int64_t max_gen_toks);

// The greedy loop both generate_until and generate_until_seq2seq run: from `logits` (the
// distribution of the first new token in its last row, [1, T, V] on any device), take the
// argmax, stop at a stop token, after max_new tokens or once the decoded text contains a stop
// string, else feed the token back with next(token) for the next logits. Returns the text cut
// at the first stop string and the number of tokens kept (truncated_tokens left 0).
GenerationResult greedy_until(const TextCodec& codec, const std::vector<std::string>& until,
                              int64_t max_new, int64_t vocab, engine::Tensor logits,
                              const std::function<engine::Tensor(int32_t)>& next);

}  // namespace patchbay::eval
