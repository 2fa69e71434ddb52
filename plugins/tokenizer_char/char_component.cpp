// CharComponent: config reading and logging around CharTokenizer.
#include "char_component.hpp"

namespace patchbay_char {

CharComponent::CharComponent(const patchbay::Host& host, const patchbay::ConfigView& config)
    : host_(host), tokenizer_(config.get_strings("special_tokens")) {}

int64_t CharComponent::vocab_size() const { return tokenizer_.vocab_size(); }

std::vector<int32_t> CharComponent::encode(std::string_view text, bool allow_special) const {
  return tokenizer_.encode(text, allow_special);
}

std::string CharComponent::decode(std::span<const int32_t> ids) const {
  return tokenizer_.decode(ids);
}

void CharComponent::train(std::string_view text) {
  const int64_t size = tokenizer_.train(text);
  host_.log(PB_LOG_INFO, "char",
            "trained on " + std::to_string(text.size()) + " bytes: " +
                std::to_string(tokenizer_.character_count()) + " characters, vocab " +
                std::to_string(size));
}

std::vector<patchbay::SpecialToken> CharComponent::special_tokens() const {
  std::vector<patchbay::SpecialToken> specials;
  if (tokenizer_.vocab_size() == 0) return specials;
  for (size_t i = 0; i < tokenizer_.special_tokens().size(); ++i) {
    specials.push_back({tokenizer_.special_tokens()[i], tokenizer_.special_token_id(i)});
  }
  return specials;
}

void CharComponent::save(const std::string& path) const { tokenizer_.save(path); }

void CharComponent::load(const std::string& path) { tokenizer_.load(path); }

}  // namespace patchbay_char
