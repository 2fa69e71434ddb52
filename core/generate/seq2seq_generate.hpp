// Decoding an encoder-decoder (model::EncoderDecoderModel) with the decoder-only machinery:
// the same sampler chains (generate.hpp's processors and selector, grammar constraints
// included) and the same beam search (beam_search.hpp), through their public seams.
//
//   source ids -> encoder once -> memory (shared by every decoder row)
//   decoder: start token (T5: <pad>), then one token per step with its self-attention cache
//   stop: at a stop token (the tokenizer's special tokens: </s>, <pad>, ...; not emitted) or
//         after max_new_tokens.
//
// Sampling: chain.next(logits, history, 1) with history = start token + generated ids (the
// start token is the chain's "prompt", as decoder_input_ids are HF's). Beam search:
// Seq2SeqBeamDecoder runs num_beams decoder rows over one encoder memory
// (EncoderDecoderModel::start_decoding_shared); a reorder permutes the rows' self-attention
// caches only. The prompt of beam_search is the start token, so lengths count generated
// tokens as for decoder-only models.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "generate/beam_search.hpp"
#include "model/encoder_decoder.hpp"
#include "runtime/component_instance.hpp"
#include "runtime/sampler_handle.hpp"

namespace patchbay::generate {

// The decoder's start token and the tokens that end a sequence, from a seq2seq run's
// tokenizer: start = "<pad>" (T5), stops = "</s>" when stop_at_special (transformers'
// eos_token_id; sentinels are output as text; a tokenizer without "</s>": every special
// token), else none. Throws Error(kInvalidArgument) when the tokenizer has no "<pad>" (the seq2seq
// and span_corruption objectives add it).
struct Seq2SeqTokens {
  int32_t start_id = 0;
  std::vector<int32_t> stop_ids;
};
Seq2SeqTokens seq2seq_tokens(const runtime::TokenizerHandle& tokenizer, bool stop_at_special);

// The source's ids, checked: Error(kInvalidArgument) when it encodes to nothing or to more
// than model.source_context_length tokens (refused, not truncated: docs/encoder_decoder.md).
std::vector<int32_t> encode_source(const model::EncoderDecoderModel& model,
                                   const runtime::TokenizerHandle& tokenizer,
                                   std::string_view source);

class Seq2SeqBeamDecoder : public BeamDecoder {
 public:
  // capacity: decoder positions per row (start token + generated), <= model.context_length.
  Seq2SeqBeamDecoder(model::EncoderDecoderModel& model, std::vector<int32_t> source,
                     int64_t capacity);
  std::vector<float> prefill(std::span<const int32_t> prompt, int64_t beams) override;
  void reorder(std::span<const int64_t> source) override;
  std::vector<std::vector<float>> step(std::span<const int32_t> tokens) override;

 private:
  model::EncoderDecoderModel& model_;
  std::vector<int32_t> source_;
  int64_t capacity_;
  model::Seq2SeqDecodeState state_;
};

struct Seq2SeqOutput {
  std::vector<int32_t> tokens;  // generated ids, a stopping token excluded
  double score = 0;             // beam search: its score; sampling: sum of log p of the chosen
  bool stopped = false;         // ended at a stop token rather than max_new_tokens
};

// One output through a sampler chain (reset first: equal seeds give equal outputs).
// max_new_tokens in [1, model.context_length]. Throws for an empty source.
Seq2SeqOutput seq2seq_sample(model::EncoderDecoderModel& model, std::span<const int32_t> source,
                             const Seq2SeqTokens& tokens, int64_t max_new_tokens,
                             runtime::SamplerChain& chain);

// Beam search (options.max_new_tokens <= model.context_length - 1; options.eos_tokens are
// replaced by tokens.stop_ids). processors nullable. Returns num_return_sequences, best first.
std::vector<Seq2SeqOutput> seq2seq_beam_search(model::EncoderDecoderModel& model,
                                               std::span<const int32_t> source,
                                               const Seq2SeqTokens& tokens,
                                               BeamSearchOptions options,
                                               const BeamProcessors* processors);

}  // namespace patchbay::generate
