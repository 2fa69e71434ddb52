// Text generation with the KV cache: the prompt is encoded and prefilled in one decode_step,
// then one token at a time is chosen by the sampler chain and fed back.
//
//   state = model.start_decoding(1, context_length)
//   logits = model.decode_step(state, prompt)             // prefill, [1, P, V]
//   repeat max_new_tokens times:
//     token = chain.next(logits[last], history, prompt_len)
//     stop if token is a special token (when stop_at_special)
//     logits = model.decode_step(state, [token])
//
// Context overflow (prompt + generated reaching model.context_length): sliding re-prefill.
// The window keeps the last context_length / 2 tokens (rounded up), a new decoding state is
// prefilled with them, and generation goes on; each slide costs one prefill of half the
// context, so it happens every context_length / 2 tokens. Positions restart at 0 for the
// window (what a model trained on windows of that length expects). A prompt longer than the
// context keeps its last context_length - 1 tokens. Both are reported in GenerateResult.
//
// Streaming: on_text receives the text as it becomes final. Text is decoded from all
// generated ids so far, and a trailing incomplete UTF-8 sequence (a byte-level token in the
// middle of a character) is held back until the character completes, so the pieces
// concatenate to exactly GenerateResult::text.
//
// Stop strings (GenerateOptions::stop_strings): generation ends at the first token after
// which the text contains one; the text is cut before it (the tokens keep every id chosen).
//
// Determinism: generate() resets the chain first, so equal seeds (the selector's `seed`),
// equal models and equal prompts give equal tokens.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <string_view>
#include <vector>

#include "model/language_model.hpp"
#include "runtime/component_instance.hpp"
#include "runtime/sampler_handle.hpp"

namespace patchbay::generate {

struct GenerateOptions {
  int64_t max_new_tokens = 200;
  // Stop (without emitting it) when the chosen token is one of the tokenizer's special
  // tokens (<|endoftext|> and the like).
  bool stop_at_special = true;
  // Called with each piece of final text, in order (may be empty: no streaming).
  std::function<void(std::string_view piece)> on_text;
  // Stop when the generated text contains one of these (a chat template's end-of-turn marker
  // written as text): the text ends before it. Streaming holds back a tail that could still
  // become one, so the marker is never emitted.
  std::vector<std::string> stop_strings;
};

enum class StopReason { kMaxNewTokens, kSpecialToken, kStopString };

struct GenerateResult {
  std::string text;                   // the generated text (prompt excluded)
  std::vector<int32_t> tokens;        // generated ids (a stopping special token excluded)
  int64_t prompt_tokens = 0;          // as encoded
  int64_t prompt_tokens_dropped = 0;  // prompt tokens cut to fit the context
  int64_t context_slides = 0;         // sliding re-prefills done
  StopReason stop_reason = StopReason::kMaxNewTokens;
  double prefill_seconds = 0;  // wall time of the first decode_step
  double decode_seconds = 0;   // wall time of everything after it
};

// Throws Error(kInvalidArgument) for an empty prompt (nothing to condition on: give at least
// one character) or max_new_tokens < 0, and whatever the model, tokenizer or chain throws.
GenerateResult generate(model::LanguageModel& model, const runtime::TokenizerHandle& tokenizer,
                        std::string_view prompt, const GenerateOptions& options,
                        runtime::SamplerChain& chain);

}  // namespace patchbay::generate
