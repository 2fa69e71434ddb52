// sample: a categorical draw from the softmax of the (processed) logits; -inf entries have
// probability 0. Owns a splitmix64 generator seeded from `seed`.
#ifndef PATCHBAY_PLUGINS_SAMPLER_BASIC_SAMPLE_HPP_
#define PATCHBAY_PLUGINS_SAMPLER_BASIC_SAMPLE_HPP_

#include <vector>

#include "logits_math.hpp"
#include "patchbay/sampler.hpp"

namespace sampler_basic {

class Sample : public patchbay::Sampler {
 public:
  static constexpr uint64_t kCapabilities = PB_SAMPLER_CAP_SELECTOR | PB_SAMPLER_CAP_STATEFUL;
  Sample(const patchbay::Host&, const patchbay::ConfigView& config)
      : Sample(static_cast<uint64_t>(config.get_int("seed"))) {}
  explicit Sample(uint64_t seed) : seed_(seed), rng_(seed) {}
  int32_t select(std::span<const float> logits) override;
  void reset() override { rng_ = SplitMix64(seed_); }

 private:
  uint64_t seed_;
  SplitMix64 rng_;
  // select()'s finite ids and their weights, kept between calls (no allocation per token)
  std::vector<int32_t> ids_;
  std::vector<double> weights_;
};

inline constexpr pb_config_field kSampleFields[] = {
    patchbay::Field::integer(
        "seed", "0", "seed of the splitmix64 generator (any int64, used as its uint64 bits)"),
};
inline constexpr pb_component_descriptor kSample = patchbay::make_sampler_component<Sample>(
    "sample", "1.0.0", "categorical draw from the softmax of the processed logits (splitmix64)",
    kSampleFields);

}  // namespace sampler_basic

#endif  // PATCHBAY_PLUGINS_SAMPLER_BASIC_SAMPLE_HPP_
