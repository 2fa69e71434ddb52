// identity-byte: token id = byte value (0..255); one special token, id 256, whose text comes
// from the config key `eos_token`. Byte-level: decode(encode(x)) == x for every byte string.
#pragma once

#include <patchbay/tokenizer.hpp>

namespace hello {

class IdentityByteTokenizer : public patchbay::Tokenizer {
 public:
  static constexpr uint64_t kCapabilities = PB_TOKENIZER_CAP_BYTE_LEVEL;
  static constexpr int32_t kEosId = 256;

  IdentityByteTokenizer(const patchbay::Host& host, const patchbay::ConfigView& config);

  int64_t vocab_size() const override { return 257; }
  std::vector<int32_t> encode(std::string_view text, bool allow_special) const override;
  std::string decode(std::span<const int32_t> ids) const override;
  std::vector<patchbay::SpecialToken> special_tokens() const override;
  void save(const std::string& path) const override;
  void load(const std::string& path) override;

 private:
  std::string eos_token_;
};

inline constexpr pb_config_field kIdentityByteFields[] = {
    patchbay::Field::string("eos_token", "\"<|eos|>\"",
                            "text of the end-of-text special token (id 256)"),
};

inline constexpr pb_component_descriptor kIdentityByteTokenizer =
    patchbay::make_tokenizer_component<IdentityByteTokenizer>(
        "identity-byte", "1.0.0", "every byte is its own token; example plugin of the SDK",
        kIdentityByteFields);

}  // namespace hello
