// The tokenizer's vocabulary as bytes for samplers that constrain token text (sampler
// interface 1.1, pb_sampler_vocabulary): token i's bytes are what decode([i]) gives, and the
// tokenizer's special tokens are flagged as end-of-sequence ids (their text is not output).
//
//   TokenVocabulary v = vocabulary_of(tokenizer);
//   if (chain.needs_vocabulary()) chain.set_vocabulary(v.view());
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "patchbay/sampler.h"
#include "runtime/component_instance.hpp"
#include "runtime/sampler_handle.hpp"

namespace patchbay::generate {

struct TokenVocabulary {
  std::string bytes;               // all tokens' bytes, concatenated
  std::vector<size_t> offsets{0};  // vocab + 1 entries
  std::vector<uint8_t> end_of_sequence;

  void add(std::string_view token_bytes, bool end);
  size_t size() const { return end_of_sequence.size(); }
  // Borrowed view; valid while this object lives and is not modified.
  pb_sampler_vocabulary view() const;
};

// Decodes every id of `tokenizer` alone; special tokens get end_of_sequence = 1.
TokenVocabulary vocabulary_of(const runtime::TokenizerHandle& tokenizer);

// Hands the vocabulary of `tokenizer` to the chain when one of its entries needs it.
void give_vocabulary_if_needed(runtime::SamplerChain& chain,
                               const runtime::TokenizerHandle& tokenizer);

}  // namespace patchbay::generate
