// BpeComponent: config reading and logging around BpeTokenizer.
#include "bpe_component.hpp"

namespace patchbay_bpe {
namespace {

BpeOptions options_from(const patchbay::ConfigView& config) {
  BpeOptions options;
  options.vocab_size = config.get_int("vocab_size");
  options.special_tokens = config.get_strings("special_tokens");
  options.encode_threads = static_cast<int>(config.get_int("encode_threads"));
  options.vocab_file = config.get_string("vocab_file");
  options.merges_file = config.get_string("merges_file");
  options.tokenizer_json = config.get_string("tokenizer_json");
  return options;
}

}  // namespace

BpeComponent::BpeComponent(const patchbay::Host& host, const patchbay::ConfigView& config)
    : host_(host), tokenizer_(options_from(config)) {
  if (tokenizer_.is_published()) {
    host_.log(PB_LOG_INFO, "bpe",
              "published vocabulary " + tokenizer_.published_source() + ": " +
                  std::to_string(tokenizer_.vocab_size()) + " ids, " + std::to_string(tokenizer_.merge_count()) +
                  " merges, " + std::to_string(tokenizer_.special_tokens().size()) + " special tokens");
  }
}

int64_t BpeComponent::vocab_size() const { return tokenizer_.vocab_size(); }

std::vector<int32_t> BpeComponent::encode(std::string_view text, bool allow_special) const {
  return tokenizer_.encode(text, allow_special);
}

std::string BpeComponent::decode(std::span<const int32_t> ids) const {
  return tokenizer_.decode(ids);
}

void BpeComponent::train(std::string_view text) {
  const TrainReport report = tokenizer_.train(text);
  host_.log(PB_LOG_INFO, "bpe",
            "trained on " + std::to_string(text.size()) + " bytes (" +
                std::to_string(report.distinct_pretokens) + " distinct pre-tokens): vocab " +
                std::to_string(report.reached_vocab_size) + " of " +
                std::to_string(report.requested_vocab_size) + " requested, " +
                std::to_string(report.merges) + " merges");
}

std::vector<patchbay::SpecialToken> BpeComponent::special_tokens() const {
  std::vector<patchbay::SpecialToken> specials;
  if (tokenizer_.vocab_size() == 0) return specials;  // ids exist only once merges do
  for (size_t i = 0; i < tokenizer_.special_tokens().size(); ++i) {
    specials.push_back({tokenizer_.special_tokens()[i], tokenizer_.special_token_id(i)});
  }
  return specials;
}

void BpeComponent::save(const std::string& path) const { tokenizer_.save(path); }

void BpeComponent::load(const std::string& path) { tokenizer_.load(path); }

}  // namespace patchbay_bpe
