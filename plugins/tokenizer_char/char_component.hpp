// The "char" tokenizer component: adapts patchbay_char::CharTokenizer to the SDK's
// patchbay::Tokenizer and declares its config schema. The core class throws
// patchbay::PluginError with its status code; the SDK adapter's one exception-to-status
// mapping (patchbay::guarded, component.hpp) turns it into a pb_status at the boundary.
#pragma once

#include <patchbay/tokenizer.hpp>

#include "char_tokenizer.hpp"

namespace patchbay_char {

class CharComponent : public patchbay::Tokenizer {
 public:
  // Byte fallback makes every byte string round-trip, so it is byte-level in the ABI's sense.
  static constexpr uint64_t kCapabilities = PB_TOKENIZER_CAP_TRAIN | PB_TOKENIZER_CAP_BYTE_LEVEL;

  CharComponent(const patchbay::Host& host, const patchbay::ConfigView& config);

  int64_t vocab_size() const override;
  std::vector<int32_t> encode(std::string_view text, bool allow_special) const override;
  std::string decode(std::span<const int32_t> ids) const override;
  void train(std::string_view text) override;
  std::vector<patchbay::SpecialToken> special_tokens() const override;
  void save(const std::string& path) const override;
  void load(const std::string& path) override;

 private:
  patchbay::Host host_;
  CharTokenizer tokenizer_;
};

inline constexpr pb_config_field kCharConfigFields[] = {
    patchbay::Field::strings("special_tokens", "[\"<|endoftext|>\"]",
                             "special token texts, ids after the characters and 256 byte tokens"),
};

inline constexpr pb_component_descriptor kCharTokenizer =
    patchbay::make_tokenizer_component<CharComponent>(
        "char", "1.0.0", "character-level tokenizer with byte fallback", kCharConfigFields);

}  // namespace patchbay_char
