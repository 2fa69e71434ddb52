// The part mirostat v1 and v2 share (llama.cpp semantics): sort the finite logits descending,
// softmax, keep a prefix of k tokens (the version decides k), renormalise, draw; on accept,
// the observed surprise -log2 p~(x) of the token under that truncated distribution drives
// mu <- mu - eta * (surprise - tau). mu starts (and resets) at 2 * tau.
//
// llama.cpp updates mu inside its sampling call; here the update happens in accept(), so a
// host that re-runs select() (e.g. after a grammar rejection) updates mu once, from the
// select() whose token it keeps.
#ifndef PATCHBAY_PLUGINS_SAMPLER_BASIC_MIROSTAT_HPP_
#define PATCHBAY_PLUGINS_SAMPLER_BASIC_MIROSTAT_HPP_

#include <vector>

#include "logits_math.hpp"
#include "patchbay/sampler.hpp"

namespace sampler_basic {

// The finite candidates in descending probability (ByLogitDescending), sorted on demand.
class RankedCandidates {
 public:
  explicit RankedCandidates(std::span<const float> logits)
      : logits_(logits),
        norm_(softmax_norm(logits)),
        sorted_(finite_ids(logits), ByLogitDescending{logits}) {}
  size_t size() const { return sorted_.size(); }
  int32_t id(size_t rank) { return sorted_.at(rank); }
  double prob(size_t rank) { return norm_.prob(logits_[id(rank)]); }

 private:
  std::span<const float> logits_;
  SoftmaxNorm norm_;
  LazySorted<ByLogitDescending> sorted_;
};

class Mirostat : public patchbay::Sampler {
 public:
  int32_t select(std::span<const float> logits) override;
  void accept(int32_t token) override;
  void reset() override;

  double mu() const { return mu_; }
  // Ids and renormalised probabilities (descending) of the last select(); empty if none.
  const std::vector<int32_t>& pending_ids() const { return pending_ids_; }
  const std::vector<double>& pending_probs() const { return pending_probs_; }

 protected:
  // Throws unless tau >= 0 and eta >= 0 are finite; `who` names the component in messages.
  Mirostat(const char* who, double tau, double eta, uint64_t seed);
  // How many of the candidates (descending probability) to keep; clamped to [1, size()].
  virtual size_t truncation(RankedCandidates& candidates, size_t vocab) const = 0;

 private:
  const char* who_;
  double tau_;
  double eta_;
  uint64_t seed_;
  double mu_;
  SplitMix64 rng_;
  std::vector<int32_t> pending_ids_;
  std::vector<double> pending_probs_;
};

}  // namespace sampler_basic

#endif  // PATCHBAY_PLUGINS_SAMPLER_BASIC_MIROSTAT_HPP_
