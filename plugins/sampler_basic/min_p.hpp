// min_p: keeps tokens with p_i >= min_p * p_max, computed in logit space as llama.cpp does
// (z_i >= z_max + ln(min_p)), at least min_tokens_to_keep (HF MinPLogitsWarper).
#ifndef PATCHBAY_PLUGINS_SAMPLER_BASIC_MIN_P_HPP_
#define PATCHBAY_PLUGINS_SAMPLER_BASIC_MIN_P_HPP_

#include "patchbay/sampler.hpp"

namespace sampler_basic {

class MinP : public patchbay::Sampler {
 public:
  static constexpr uint64_t kCapabilities = PB_SAMPLER_CAP_PROCESSOR;
  MinP(const patchbay::Host&, const patchbay::ConfigView& config)
      : MinP(config.get_float("min_p"), config.get_int("min_tokens_to_keep")) {}
  MinP(double min_p, int64_t min_tokens_to_keep);  // throws unless 0 <= min_p <= 1
  void apply(std::span<float> logits, std::span<const int32_t> history, size_t prompt_len) override;

 private:
  double min_p_;
  size_t min_tokens_to_keep_;
};

inline constexpr pb_config_field kMinPFields[] = {
    patchbay::Field::real("min_p", "0.05", "keep tokens with p >= min_p * p_max; 0 = off")
        .range(0.0, 1.0),
    patchbay::Field::integer("min_tokens_to_keep", "1", "never keep fewer tokens than this")
        .range(1, 2147483647),
};
inline constexpr pb_component_descriptor kMinP = patchbay::make_sampler_component<MinP>(
    "min_p", "1.0.0", "keeps tokens with p >= min_p * p_max (logit space, as llama.cpp)",
    kMinPFields);

}  // namespace sampler_basic

#endif  // PATCHBAY_PLUGINS_SAMPLER_BASIC_MIN_P_HPP_
