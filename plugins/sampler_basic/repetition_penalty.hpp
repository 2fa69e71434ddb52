// repetition_penalty: the CTRL penalty (Keskar et al. 2019) as HF applies it: every distinct
// token seen in the window, once: z > 0 -> z / r, z <= 0 -> z * r. The window is the prompt
// and the generated tokens (HF) or a last-n window (llama.cpp's penalty_last_n).
#ifndef PATCHBAY_PLUGINS_SAMPLER_BASIC_REPETITION_PENALTY_HPP_
#define PATCHBAY_PLUGINS_SAMPLER_BASIC_REPETITION_PENALTY_HPP_

#include "patchbay/sampler.hpp"

namespace sampler_basic {

class RepetitionPenalty : public patchbay::Sampler {
 public:
  static constexpr uint64_t kCapabilities = PB_SAMPLER_CAP_PROCESSOR;
  RepetitionPenalty(const patchbay::Host&, const patchbay::ConfigView& config)
      : RepetitionPenalty(config.get_float("penalty"), config.get_int("last_n"),
                          config.get_bool("include_prompt")) {}
  // Throws unless penalty > 0 and last_n >= 0 (0 = the whole window).
  RepetitionPenalty(double penalty, int64_t last_n, bool include_prompt);
  void apply(std::span<float> logits, std::span<const int32_t> history, size_t prompt_len) override;

 private:
  float penalty_;
  int64_t last_n_;
  bool include_prompt_;
};

inline constexpr pb_config_field kRepetitionPenaltyFields[] = {
    patchbay::Field::real(
        "penalty", "1.0",
        "CTRL penalty r > 0 once per seen token: z>0 -> z/r, z<=0 -> z*r; 1 = off"),
    patchbay::Field::integer("last_n", "0", "only the last n ids of the window count; 0 = all")
        .range(0, 2147483647),
    patchbay::Field::boolean("include_prompt", "true", "count prompt tokens as seen (HF: yes)"),
};
inline constexpr pb_component_descriptor kRepetitionPenalty =
    patchbay::make_sampler_component<RepetitionPenalty>(
        "repetition_penalty", "1.0.0",
        "CTRL repetition penalty over the prompt and generated tokens (HF) or a last-n window",
        kRepetitionPenaltyFields);

}  // namespace sampler_basic

#endif  // PATCHBAY_PLUGINS_SAMPLER_BASIC_REPETITION_PENALTY_HPP_
