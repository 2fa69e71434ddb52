// Scoring token requests on an encoder-decoder, as lm-evaluation-harness's Hugging Face backend
// does for backend = "seq2seq" (AutoModelForSeq2SeqLM; models/huggingface.py
// _loglikelihood_tokens, _select_cont_toks, generate_until):
//
//   encoder input  = context[-S:]                     S = model.source_context_length; tokens
//                    cut from the left are counted (truncated_tokens); rows right-padded, with
//                    the padding mask (lm-eval's attn_mask)
//   decoder input  = [start] + continuation[:-1]      start = the decoder start token ("<pad>",
//                    T5's decoder_start_token_id): what `labels = continuation` makes inside
//                    transformers' T5 (shift right)
//   logprob        = Σ log_softmax(logits)[k, continuation[k]] over k < len(continuation)
//                    (the decoder's first len(continuation) positions; right padding dropped)
//   is_greedy      = every continuation token is the argmax at its position
//
// The context and the continuation are tokenised separately (encode_pair_separately), as
// lm-eval's _encode_pair does for seq2seq models. Batching: requests sorted by context (longest
// first) then continuation, identical pairs scored once, `batch_size` decoder rows per batch;
// the distinct contexts of a batch go through the encoder once each (the choices of a
// multiple-choice item share one encoder pass: ScoringStats::shared_contexts) and their memory
// is gathered to the rows. Scores equal one request scored alone up to rounding.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "eval/request_scorer.hpp"
#include "eval/token_requests.hpp"
#include "model/encoder_decoder.hpp"

namespace patchbay::eval {

// Throws Error(kInvalidArgument) for a continuation longer than model.context_length.
std::vector<LoglikelihoodResult> score_loglikelihood_seq2seq(model::EncoderDecoderModel& model,
                                                             int32_t start_token,
                                                             const std::vector<TokenPair>& requests,
                                                             int64_t batch_size,
                                                             ScoringStats* stats = nullptr);

// Greedy decoding, one prompt at a time (longest first): the prompt goes to the encoder,
// left-truncated to model.source_context_length (lm-eval: max_ctx_len = max_length for
// seq2seq; an empty prompt becomes the prefix token), the decoder starts from start_token and
// stops at a stop token, after max_gen_toks tokens or when its context is full
// (model.context_length - 1 new tokens), or once the text contains a stop string; the text is
// cut at the first stop string.
std::vector<GenerationResult> generate_until_seq2seq(model::EncoderDecoderModel& model,
                                                     int32_t start_token, const TextCodec& codec,
                                                     const std::vector<std::string>& prompts,
                                                     const std::vector<std::string>& until,
                                                     int64_t max_gen_toks);

}  // namespace patchbay::eval
