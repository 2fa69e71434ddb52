// no_repeat_ngram: HF NoRepeatNGramLogitsProcessor. Bans (-inf) every token that would
// complete an n-gram already present in the sequence (prompt included by default).
#ifndef PATCHBAY_PLUGINS_SAMPLER_BASIC_NO_REPEAT_NGRAM_HPP_
#define PATCHBAY_PLUGINS_SAMPLER_BASIC_NO_REPEAT_NGRAM_HPP_

#include "patchbay/sampler.hpp"

namespace sampler_basic {

class NoRepeatNgram : public patchbay::Sampler {
 public:
  static constexpr uint64_t kCapabilities = PB_SAMPLER_CAP_PROCESSOR;
  NoRepeatNgram(const patchbay::Host&, const patchbay::ConfigView& config)
      : NoRepeatNgram(config.get_int("n"), config.get_bool("include_prompt")) {}
  NoRepeatNgram(int64_t n, bool include_prompt);  // throws unless n >= 1
  void apply(std::span<float> logits, std::span<const int32_t> history, size_t prompt_len) override;

 private:
  size_t n_;
  bool include_prompt_;
};

inline constexpr pb_config_field kNoRepeatNgramFields[] = {
    patchbay::Field::integer("n", "3",
                             "ban tokens that would complete an n-gram already in the sequence")
        .range(1, 1024),
    patchbay::Field::boolean("include_prompt", "true", "n-grams of the prompt count too (HF: yes)"),
};
inline constexpr pb_component_descriptor kNoRepeatNgram =
    patchbay::make_sampler_component<NoRepeatNgram>("no_repeat_ngram", "1.0.0",
                                                    "bans tokens that would repeat an n-gram (HF)",
                                                    kNoRepeatNgramFields);

}  // namespace sampler_basic

#endif  // PATCHBAY_PLUGINS_SAMPLER_BASIC_NO_REPEAT_NGRAM_HPP_
