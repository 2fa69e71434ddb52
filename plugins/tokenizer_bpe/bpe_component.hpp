// The "bpe" tokenizer component: adapts patchbay_bpe::BpeTokenizer to the SDK's
// patchbay::Tokenizer and declares its config schema. The core class throws
// patchbay::PluginError with its status code; the SDK adapter's one exception-to-status
// mapping (patchbay::guarded, component.hpp) turns it into a pb_status at the boundary.
#pragma once

#include <patchbay/tokenizer.hpp>

#include "bpe_tokenizer.hpp"

namespace patchbay_bpe {

class BpeComponent : public patchbay::Tokenizer {
 public:
  static constexpr uint64_t kCapabilities = PB_TOKENIZER_CAP_TRAIN | PB_TOKENIZER_CAP_BYTE_LEVEL;

  BpeComponent(const patchbay::Host& host, const patchbay::ConfigView& config);

  int64_t vocab_size() const override;
  std::vector<int32_t> encode(std::string_view text, bool allow_special) const override;
  std::string decode(std::span<const int32_t> ids) const override;
  void train(std::string_view text) override;
  std::vector<patchbay::SpecialToken> special_tokens() const override;
  void save(const std::string& path) const override;
  void load(const std::string& path) override;

 private:
  patchbay::Host host_;
  BpeTokenizer tokenizer_;
};

inline constexpr pb_config_field kBpeConfigFields[] = {
    patchbay::Field::integer("vocab_size", "4096",
                             "target vocabulary size incl. 256 byte tokens and the special tokens; "
                             "training stops earlier when no pair occurs twice")
        .range(257, 1000000),
    patchbay::Field::strings("special_tokens", "[\"<|endoftext|>\"]",
                             "special token texts, ids after the merges in this order"),
    patchbay::Field::integer("encode_threads", "0",
                             "threads for encoding long texts (0: all hardware threads)")
        .range(0, 1024),
    patchbay::Field::string("vocab_file", "\"\"",
                            "GPT-2 encoder.json to use instead of training (with merges_file; keeps its ids; "
                            "special_tokens name its specials)"),
    patchbay::Field::string("merges_file", "\"\"", "GPT-2 vocab.bpe (merge ranks), with vocab_file"),
    patchbay::Field::string("tokenizer_json", "\"\"",
                            "Hugging Face tokenizer.json (byte-level BPE) to use instead of training; its "
                            "added_tokens are the special tokens"),
};

inline constexpr pb_component_descriptor kBpeTokenizer =
    patchbay::make_tokenizer_component<BpeComponent>(
        "bpe", "1.1.0", "byte-level BPE with GPT-2 pre-tokenisation (PCRE2); GPT-2 and Hugging Face vocabularies", kBpeConfigFields);

}  // namespace patchbay_bpe
