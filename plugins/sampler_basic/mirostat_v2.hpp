// mirostat_v2 (llama.cpp llama_sampler_mirostat_v2): keeps the descending prefix of tokens
// whose surprise -log2 p is <= mu (at least one), renormalises, draws; μ0 = 2τ.
#ifndef PATCHBAY_PLUGINS_SAMPLER_BASIC_MIROSTAT_V2_HPP_
#define PATCHBAY_PLUGINS_SAMPLER_BASIC_MIROSTAT_V2_HPP_

#include "mirostat.hpp"

namespace sampler_basic {

class MirostatV2 : public Mirostat {
 public:
  static constexpr uint64_t kCapabilities = PB_SAMPLER_CAP_SELECTOR | PB_SAMPLER_CAP_STATEFUL;
  MirostatV2(const patchbay::Host&, const patchbay::ConfigView& config)
      : MirostatV2(config.get_float("tau"), config.get_float("eta"),
                   static_cast<uint64_t>(config.get_int("seed"))) {}
  MirostatV2(double tau, double eta, uint64_t seed) : Mirostat("mirostat_v2", tau, eta, seed) {}

 protected:
  size_t truncation(RankedCandidates& candidates, size_t vocab) const override;
};

inline constexpr pb_config_field kMirostatV2Fields[] = {
    patchbay::Field::real("tau", "5.0", "target surprise in bits; mu starts at 2 * tau")
        .range(0.0, 100.0),
    patchbay::Field::real("eta", "0.1", "learning rate of mu").range(0.0, 10.0),
    patchbay::Field::integer(
        "seed", "0", "seed of the splitmix64 generator (any int64, used as its uint64 bits)"),
};
inline constexpr pb_component_descriptor kMirostatV2 = patchbay::make_sampler_component<MirostatV2>(
    "mirostat_v2", "1.0.0", "Mirostat v2 (llama.cpp semantics)", kMirostatV2Fields);

}  // namespace sampler_basic

#endif  // PATCHBAY_PLUGINS_SAMPLER_BASIC_MIROSTAT_V2_HPP_
