// greedy: argmax of the logits, the lowest id among ties; stateless and deterministic.
#ifndef PATCHBAY_PLUGINS_SAMPLER_BASIC_GREEDY_HPP_
#define PATCHBAY_PLUGINS_SAMPLER_BASIC_GREEDY_HPP_

#include "patchbay/sampler.hpp"

namespace sampler_basic {

class Greedy : public patchbay::Sampler {
 public:
  static constexpr uint64_t kCapabilities = PB_SAMPLER_CAP_SELECTOR;
  Greedy() = default;
  Greedy(const patchbay::Host&, const patchbay::ConfigView&) {}
  int32_t select(std::span<const float> logits) override;
};

inline constexpr pb_component_descriptor kGreedy =
    patchbay::make_sampler_component<Greedy>("greedy", "1.0.0", "argmax, lowest id on ties");

}  // namespace sampler_basic

#endif  // PATCHBAY_PLUGINS_SAMPLER_BASIC_GREEDY_HPP_
