// Text requests -> token requests, as lm-evaluation-harness's Hugging Face backend makes them
// (api/model.py loglikelihood / _encode_pair, models/huggingface.py loglikelihood_rolling,
// utils.get_rolling_token_windows / make_disjoint_window).
//
// Context/continuation boundary (_encode_pair):
//   1. whitespace at the end of the context moves to the front of the continuation
//      ("Q: x\nA: " + "Paris" is scored as "Q: x\nA:" + " Paris");
//   2. whole = encode(context + continuation), context_tokens = encode(context),
//      continuation_tokens = whole[len(context_tokens):]
//   so a tokenizer that merges across the boundary gives the continuation the tokens of the
//   whole string past the context's length (the input is context_tokens + that: when
//   whole[:len(context_tokens)] differs from context_tokens, counted as a boundary mismatch).
//   An empty context scores the continuation after the prefix token (the first special token,
//   GPT-2's <|endoftext|>: what the HF export names bos/eos), or, when the continuation already
//   starts with it, after its first token.
// Rolling windows (perplexity of a whole document, max length L, context 1):
//   first window  [prefix] + t[0 .. L-2]  predicts t[0 .. L-1];
//   each next one predicts the next <= L tokens, conditioned on the L - n tokens before them;
//   every token is predicted exactly once.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace patchbay::eval {

// The tokenizer as evaluation needs it.
struct TextCodec {
  std::function<std::vector<int32_t>(std::string_view)> encode;
  std::function<std::string(const std::vector<int32_t>&)> decode;
  std::optional<int32_t> prefix_token;  // lm-eval's prefix_token_id (BOS, else EOS)
  std::vector<int32_t> stop_tokens;     // special tokens that end a generation (EOS)
  // An encoder-decoder's decoder start token ("<pad>", T5's decoder_start_token_id); read only
  // when the model scored is an encoder-decoder.
  std::optional<int32_t> decoder_start_token;
};

struct TokenPair {
  std::vector<int32_t> context;
  std::vector<int32_t> continuation;
  bool boundary_mismatch = false;  // whole[:len(context)] != encode(context)
};

// Throws Error(kInvalidArgument) when the continuation tokenises to nothing, when the context
// is only whitespace (nothing would remain to condition on), or when it is empty and the
// tokenizer has no prefix token. `what` names the request in messages.
TokenPair encode_pair(const TextCodec& codec, const std::string& context,
                      const std::string& continuation, const std::string& what);

// lm-eval's _encode_pair for seq2seq models: the same whitespace move and empty-context
// prefix as encode_pair, but the context and the continuation tokenised separately (the
// context goes to the encoder, the continuation to the decoder), so there is no boundary
// mismatch. Throws as encode_pair.
TokenPair encode_pair_separately(const TextCodec& codec, const std::string& context,
                                 const std::string& continuation, const std::string& what);

// Rolling windows of `tokens` for a model of max length `max_length` (already disjoint:
// each pair's context does not overlap its continuation).
std::vector<TokenPair> rolling_windows(const std::vector<int32_t>& tokens, int32_t prefix_token,
                                       int64_t max_length);

// lm-eval's count_words: len(re.split(r"\s+", text)); count_bytes: UTF-8 length; and
// Python's len(str): code points (acc_norm's length).
int64_t count_words(std::string_view text);
int64_t count_code_points(std::string_view text);

}  // namespace patchbay::eval
