// CharComponent: config reading and exception-to-status mapping around CharTokenizer.
#include "char_component.hpp"

#include <stdexcept>

namespace patchbay_char {
namespace {

// Runs `body`, rethrowing the core class's standard exceptions as PluginError with the
// matching status code. PluginError and bad_alloc pass through unchanged.
template <class Body>
auto with_status_codes(Body&& body) -> decltype(body()) {
  try {
    return body();
  } catch (const std::out_of_range& e) {
    throw patchbay::PluginError(PB_STATUS_OUT_OF_RANGE, e.what());
  } catch (const std::invalid_argument& e) {
    throw patchbay::PluginError(PB_STATUS_INVALID_ARGUMENT, e.what());
  } catch (const std::runtime_error& e) {
    throw patchbay::PluginError(PB_STATUS_IO_ERROR, e.what());
  }
}

}  // namespace

CharComponent::CharComponent(const patchbay::Host& host, const patchbay::ConfigView& config)
    : host_(host),
      tokenizer_(with_status_codes([&] { return CharTokenizer(config.get_strings("special_tokens")); })) {}

int64_t CharComponent::vocab_size() const { return tokenizer_.vocab_size(); }

std::vector<int32_t> CharComponent::encode(std::string_view text, bool allow_special) const {
  return with_status_codes([&] { return tokenizer_.encode(text, allow_special); });
}

std::string CharComponent::decode(std::span<const int32_t> ids) const {
  return with_status_codes([&] { return tokenizer_.decode(ids); });
}

void CharComponent::train(std::string_view text) {
  const int64_t size = with_status_codes([&] { return tokenizer_.train(text); });
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

void CharComponent::save(const std::string& path) const {
  with_status_codes([&] { tokenizer_.save(path); });
}

void CharComponent::load(const std::string& path) {
  with_status_codes([&] { tokenizer_.load(path); });
}

}  // namespace patchbay_char
