// typical: locally typical sampling (Meister et al. 2022; HF TypicalLogitsWarper after the
// off-by-one fix #27165): keep the tokens whose surprise -ln p_i is closest to the entropy H,
// the smallest such set whose mass reaches `mass`, ties at the boundary kept.
#ifndef PATCHBAY_PLUGINS_SAMPLER_BASIC_TYPICAL_HPP_
#define PATCHBAY_PLUGINS_SAMPLER_BASIC_TYPICAL_HPP_

#include "patchbay/sampler.hpp"

namespace sampler_basic {

class Typical : public patchbay::Sampler {
 public:
  static constexpr uint64_t kCapabilities = PB_SAMPLER_CAP_PROCESSOR;
  Typical(const patchbay::Host&, const patchbay::ConfigView& config)
      : Typical(config.get_float("mass"), config.get_int("min_tokens_to_keep")) {}
  Typical(double mass, int64_t min_tokens_to_keep);  // throws unless 0 <= mass <= 1
  void apply(std::span<float> logits, std::span<const int32_t> history, size_t prompt_len) override;

 private:
  double mass_;
  size_t min_tokens_to_keep_;
};

inline constexpr pb_config_field kTypicalFields[] = {
    patchbay::Field::real(
        "mass", "0.9",
        "keep the tokens closest to the entropy until their mass reaches this; 1 = off")
        .range(0.0, 1.0),
    patchbay::Field::integer("min_tokens_to_keep", "1", "never keep fewer tokens than this")
        .range(1, 2147483647),
};
inline constexpr pb_component_descriptor kTypical = patchbay::make_sampler_component<Typical>(
    "typical", "1.0.0", "locally typical sampling (HF after #27165)", kTypicalFields);

}  // namespace sampler_basic

#endif  // PATCHBAY_PLUGINS_SAMPLER_BASIC_TYPICAL_HPP_
