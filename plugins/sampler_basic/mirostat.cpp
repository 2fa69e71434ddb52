// Shared mirostat draw and mu update (see mirostat.hpp). Arithmetic in double (llama.cpp
// uses float), so mu agrees with llama.cpp to float rounding, not bit for bit.
#include "mirostat.hpp"

#include <algorithm>
#include <cmath>
#include <string>

namespace sampler_basic {

Mirostat::Mirostat(const char* who, double tau, double eta, uint64_t seed)
    : who_(who), tau_(tau), eta_(eta), seed_(seed), mu_(2.0 * tau), rng_(seed) {
  if (!(tau >= 0.0) || !std::isfinite(tau) || !(eta >= 0.0) || !std::isfinite(eta)) {
    throw patchbay::PluginError(PB_STATUS_INVALID_ARGUMENT,
                                std::string(who) + ": tau = " + std::to_string(tau) +
                                    " and eta = " + std::to_string(eta) +
                                    " must be finite and >= 0");
  }
}

int32_t Mirostat::select(std::span<const float> logits) {
  check_logits(logits, who_);
  RankedCandidates candidates(logits);
  if (candidates.size() == 0) {
    throw patchbay::PluginError(PB_STATUS_INVALID_ARGUMENT,
                                std::string(who_) + ": no finite logit; every token was removed");
  }
  const size_t k = std::clamp<size_t>(truncation(candidates, logits.size()), 1, candidates.size());
  std::vector<int32_t> ids(k);
  std::vector<double> probs(k);
  double kept_mass = 0.0;
  for (size_t rank = 0; rank < k; ++rank) {
    ids[rank] = candidates.id(rank);
    probs[rank] = candidates.prob(rank);
    kept_mass += probs[rank];
  }
  for (double& p : probs) p /= kept_mass;
  const size_t index = draw_index(probs, rng_);
  const int32_t token = ids[index];
  pending_ids_ = std::move(ids);
  pending_probs_ = std::move(probs);
  return token;
}

void Mirostat::accept(int32_t token) {
  if (pending_ids_.empty()) {
    throw patchbay::PluginError(
        PB_STATUS_INVALID_ARGUMENT,
        std::string(who_) +
            ": accept() without a select() since the last accept()/reset(); "
            "mu is updated from the probability of the selected token");
  }
  const auto found = std::find(pending_ids_.begin(), pending_ids_.end(), token);
  if (found == pending_ids_.end()) {
    throw patchbay::PluginError(PB_STATUS_INVALID_ARGUMENT,
                                std::string(who_) + ": accepted token " + std::to_string(token) +
                                    " lies outside the " + std::to_string(pending_ids_.size()) +
                                    " tokens the last select() kept; accept the token select() "
                                    "returned (or one of its truncated set)");
  }
  const double p = pending_probs_[static_cast<size_t>(found - pending_ids_.begin())];
  const double observed_surprise = -std::log2(p);
  mu_ -= eta_ * (observed_surprise - tau_);
  pending_ids_.clear();
  pending_probs_.clear();
}

void Mirostat::reset() {
  mu_ = 2.0 * tau_;
  rng_ = SplitMix64(seed_);
  pending_ids_.clear();
  pending_probs_.clear();
}

}  // namespace sampler_basic
