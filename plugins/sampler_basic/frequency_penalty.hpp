// frequency_penalty: OpenAI's count-weighted penalty, z_j -= c_j * alpha_f, where c_j is how
// often token j occurs in the window (by default the generated tokens only, as OpenAI counts
// sampled tokens; include_prompt and last_n widen or narrow it like llama.cpp's penalties).
#ifndef PATCHBAY_PLUGINS_SAMPLER_BASIC_FREQUENCY_PENALTY_HPP_
#define PATCHBAY_PLUGINS_SAMPLER_BASIC_FREQUENCY_PENALTY_HPP_

#include "patchbay/sampler.hpp"

namespace sampler_basic {

class FrequencyPenalty : public patchbay::Sampler {
 public:
  static constexpr uint64_t kCapabilities = PB_SAMPLER_CAP_PROCESSOR;
  FrequencyPenalty(const patchbay::Host&, const patchbay::ConfigView& config)
      : FrequencyPenalty(config.get_float("penalty"), config.get_int("last_n"),
                         config.get_bool("include_prompt")) {}
  // Throws unless penalty is finite and last_n >= 0 (0 = the whole window).
  FrequencyPenalty(double penalty, int64_t last_n, bool include_prompt);
  void apply(std::span<float> logits, std::span<const int32_t> history, size_t prompt_len) override;

 private:
  float penalty_;
  int64_t last_n_;
  bool include_prompt_;
};

inline constexpr pb_config_field kFrequencyPenaltyFields[] = {
    patchbay::Field::real("penalty", "0.0", "alpha_f: z_j -= count_j * alpha_f (OpenAI)")
        .range(-2.0, 2.0),
    patchbay::Field::integer("last_n", "0", "only the last n ids of the window count; 0 = all")
        .range(0, 2147483647),
    patchbay::Field::boolean("include_prompt", "false",
                             "count prompt tokens too (OpenAI: no, generated tokens only)"),
};
inline constexpr pb_component_descriptor kFrequencyPenalty =
    patchbay::make_sampler_component<FrequencyPenalty>(
        "frequency_penalty", "1.0.0", "OpenAI frequency penalty z_j -= c_j * alpha_f",
        kFrequencyPenaltyFields);

}  // namespace sampler_basic

#endif  // PATCHBAY_PLUGINS_SAMPLER_BASIC_FREQUENCY_PENALTY_HPP_
