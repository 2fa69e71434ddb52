// presence_penalty: OpenAI's flat penalty, z_j -= alpha_p when token j occurs at least once
// in the window (by default the generated tokens only, as OpenAI does).
#ifndef PATCHBAY_PLUGINS_SAMPLER_BASIC_PRESENCE_PENALTY_HPP_
#define PATCHBAY_PLUGINS_SAMPLER_BASIC_PRESENCE_PENALTY_HPP_

#include "patchbay/sampler.hpp"

namespace sampler_basic {

class PresencePenalty : public patchbay::Sampler {
 public:
  static constexpr uint64_t kCapabilities = PB_SAMPLER_CAP_PROCESSOR;
  PresencePenalty(const patchbay::Host&, const patchbay::ConfigView& config)
      : PresencePenalty(config.get_float("penalty"), config.get_int("last_n"),
                        config.get_bool("include_prompt")) {}
  // Throws unless penalty is finite and last_n >= 0 (0 = the whole window).
  PresencePenalty(double penalty, int64_t last_n, bool include_prompt);
  void apply(std::span<float> logits, std::span<const int32_t> history, size_t prompt_len) override;

 private:
  float penalty_;
  int64_t last_n_;
  bool include_prompt_;
};

inline constexpr pb_config_field kPresencePenaltyFields[] = {
    patchbay::Field::real("penalty", "0.0",
                          "alpha_p: z_j -= alpha_p for every token present (OpenAI)")
        .range(-2.0, 2.0),
    patchbay::Field::integer("last_n", "0", "only the last n ids of the window count; 0 = all")
        .range(0, 2147483647),
    patchbay::Field::boolean("include_prompt", "false",
                             "count prompt tokens too (OpenAI: no, generated tokens only)"),
};
inline constexpr pb_component_descriptor kPresencePenalty =
    patchbay::make_sampler_component<PresencePenalty>(
        "presence_penalty", "1.0.0", "OpenAI presence penalty z_j -= alpha_p * [c_j > 0]",
        kPresencePenaltyFields);

}  // namespace sampler_basic

#endif  // PATCHBAY_PLUGINS_SAMPLER_BASIC_PRESENCE_PENALTY_HPP_
