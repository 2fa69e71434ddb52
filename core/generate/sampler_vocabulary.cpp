// TokenVocabulary (see sampler_vocabulary.hpp).
#include "generate/sampler_vocabulary.hpp"

#include <span>
#include <unordered_set>

#include "runtime/sampler_handle.hpp"

namespace patchbay::generate {

void TokenVocabulary::add(std::string_view token_bytes, bool end) {
  bytes.append(token_bytes);
  offsets.push_back(bytes.size());
  end_of_sequence.push_back(end ? 1 : 0);
}

pb_sampler_vocabulary TokenVocabulary::view() const {
  return pb_sampler_vocabulary{sizeof(pb_sampler_vocabulary), size(), bytes.data(), offsets.data(),
                               end_of_sequence.data()};
}

TokenVocabulary vocabulary_of(const runtime::TokenizerHandle& tokenizer) {
  std::unordered_set<int32_t> specials;
  for (const runtime::SpecialTokenInfo& s : tokenizer.special_tokens()) specials.insert(s.id);
  TokenVocabulary v;
  const int64_t n = tokenizer.vocab_size();
  for (int32_t id = 0; id < n; ++id) {
    const bool end = specials.count(id) != 0;
    v.add(end ? std::string() : tokenizer.decode(std::span<const int32_t>(&id, 1)), end);
  }
  return v;
}

void give_vocabulary_if_needed(runtime::SamplerChain& chain,
                               const runtime::TokenizerHandle& tokenizer) {
  if (!chain.needs_vocabulary()) return;
  const TokenVocabulary v = vocabulary_of(tokenizer);
  chain.set_vocabulary(v.view());
}

}  // namespace patchbay::generate
