// The "epsilon" sampler processor (Hewitt et al. 2022, "Truncation Sampling as Language Model
// Desmoothing"; HF EpsilonLogitsWarper): tokens whose probability softmax(z)_i is below
// `epsilon` become -inf; the `min_tokens_to_keep` most probable tokens always stay. Logits
// already -inf stay -inf; NaN or +inf logits are refused (PB_STATUS_INVALID_ARGUMENT).
#pragma once

#include <patchbay/sampler.hpp>

namespace epsilon_sampler {

class Epsilon : public patchbay::Sampler {
 public:
  static constexpr uint64_t kCapabilities = PB_SAMPLER_CAP_PROCESSOR;
  Epsilon(const patchbay::Host& host, const patchbay::ConfigView& config);
  void apply(std::span<float> logits, std::span<const int32_t> history, size_t prompt_len) override;

 private:
  double epsilon_;
  size_t min_keep_;
};

inline constexpr pb_config_field kEpsilonFields[] = {
    patchbay::Field::real("epsilon", "0.0003", "drop tokens whose probability is below this")
        .range(0.0, 1.0),
    patchbay::Field::integer("min_tokens_to_keep", "1", "never keep fewer tokens than this")
        .range(1, 2147483647),
};

inline constexpr pb_component_descriptor kEpsilon = patchbay::make_sampler_component<Epsilon>(
    "epsilon", "1.0.0", "epsilon sampling: drops tokens with probability below epsilon",
    kEpsilonFields);

}  // namespace epsilon_sampler
