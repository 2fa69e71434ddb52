// mirostat_v1 (Basu et al. 2021, llama.cpp llama_sampler_mirostat): estimates the Zipf
// exponent s from the top m probabilities and keeps the k tokens that the target surprise mu
// calls for; μ0 = 2τ. Its clone copies mu and the RNG into the copy (llama.cpp @c392e50
// wrote them into the source).
#ifndef PATCHBAY_PLUGINS_SAMPLER_BASIC_MIROSTAT_V1_HPP_
#define PATCHBAY_PLUGINS_SAMPLER_BASIC_MIROSTAT_V1_HPP_

#include "mirostat.hpp"

namespace sampler_basic {

class MirostatV1 : public Mirostat {
 public:
  static constexpr uint64_t kCapabilities = PB_SAMPLER_CAP_SELECTOR | PB_SAMPLER_CAP_STATEFUL;
  MirostatV1(const patchbay::Host&, const patchbay::ConfigView& config)
      : MirostatV1(config.get_float("tau"), config.get_float("eta"), config.get_int("m"),
                   static_cast<uint64_t>(config.get_int("seed"))) {}
  MirostatV1(double tau, double eta, int64_t m, uint64_t seed);  // throws unless m >= 2

  // k for `candidate_count` candidates whose leading probabilities (descending, of the full
  // softmax) are `top_probs` (at least min(m, candidate_count) of them), window m, target mu
  // and a vocabulary of n_vocab tokens; always in [1, candidate_count].
  static size_t truncation_k(std::span<const double> top_probs, size_t candidate_count, int64_t m,
                             double mu, size_t n_vocab);

 protected:
  size_t truncation(RankedCandidates& candidates, size_t vocab) const override;

 private:
  int64_t m_;
};

inline constexpr pb_config_field kMirostatV1Fields[] = {
    patchbay::Field::real("tau", "5.0", "target surprise in bits; mu starts at 2 * tau")
        .range(0.0, 100.0),
    patchbay::Field::real("eta", "0.1", "learning rate of mu").range(0.0, 10.0),
    patchbay::Field::integer("m", "100", "top tokens used to fit the Zipf exponent")
        .range(2, 1000000),
    patchbay::Field::integer(
        "seed", "0", "seed of the splitmix64 generator (any int64, used as its uint64 bits)"),
};
inline constexpr pb_component_descriptor kMirostatV1 = patchbay::make_sampler_component<MirostatV1>(
    "mirostat_v1", "1.0.0", "Mirostat v1 (llama.cpp semantics, clone copies mu and RNG)",
    kMirostatV1Fields);

}  // namespace sampler_basic

#endif  // PATCHBAY_PLUGINS_SAMPLER_BASIC_MIROSTAT_V1_HPP_
