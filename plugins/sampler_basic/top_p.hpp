// top_p (nucleus, HF TopPLogitsWarper semantics): keeps the smallest set of most probable
// tokens whose probability mass reaches p, at least min_tokens_to_keep; p = 1 is a no-op.
#ifndef PATCHBAY_PLUGINS_SAMPLER_BASIC_TOP_P_HPP_
#define PATCHBAY_PLUGINS_SAMPLER_BASIC_TOP_P_HPP_

#include "patchbay/sampler.hpp"

namespace sampler_basic {

class TopP : public patchbay::Sampler {
 public:
  static constexpr uint64_t kCapabilities = PB_SAMPLER_CAP_PROCESSOR;
  TopP(const patchbay::Host&, const patchbay::ConfigView& config)
      : TopP(config.get_float("p"), config.get_int("min_tokens_to_keep")) {}
  TopP(double p, int64_t min_tokens_to_keep);  // throws unless 0 <= p <= 1, min_keep >= 1
  void apply(std::span<float> logits, std::span<const int32_t> history, size_t prompt_len) override;

 private:
  double p_;
  size_t min_tokens_to_keep_;
};

inline constexpr pb_config_field kTopPFields[] = {
    patchbay::Field::real("p", "0.9",
                          "keep the most probable tokens until their mass reaches p; 1 = off (HF)")
        .range(0.0, 1.0),
    patchbay::Field::integer("min_tokens_to_keep", "1", "never keep fewer tokens than this")
        .range(1, 2147483647),
};
inline constexpr pb_component_descriptor kTopP = patchbay::make_sampler_component<TopP>(
    "top_p", "1.0.0", "nucleus filtering: the smallest most-probable set with mass >= p (HF)",
    kTopPFields);

}  // namespace sampler_basic

#endif  // PATCHBAY_PLUGINS_SAMPLER_BASIC_TOP_P_HPP_
