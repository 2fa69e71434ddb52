// Shared arithmetic of the sampler_basic components: input checks, the descending candidate
// order every truncation uses, a softmax over the finite logits in double, the splitmix64
// generator and categorical draws. Everything here is deterministic and platform-independent
// (no std:: distributions), so equal seeds give equal tokens everywhere.
#ifndef PATCHBAY_PLUGINS_SAMPLER_BASIC_LOGITS_MATH_HPP_
#define PATCHBAY_PLUGINS_SAMPLER_BASIC_LOGITS_MATH_HPP_

#include <cstdint>
#include <span>
#include <vector>

#include "patchbay/component.hpp"

namespace sampler_basic {

// Throws patchbay::PluginError (PB_STATUS_INVALID_ARGUMENT) naming `who` if a logit is NaN or +inf.
void check_logits(std::span<const float> logits, const char* who);

// Throws patchbay::PluginError (PB_STATUS_INVALID_ARGUMENT) naming `who` if a history id lies outside [0, vocab) or
// prompt_len > history.size().
void check_history(std::span<const int32_t> history, size_t prompt_len, size_t vocab,
                   const char* who);

// The part of history a penalty looks at: the generated part only unless include_prompt,
// then its last `last_n` ids (0 = all of it).
std::span<const int32_t> history_window(std::span<const int32_t> history, size_t prompt_len,
                                        bool include_prompt, int64_t last_n);

// Ids whose logit is finite, sorted by logit descending, ties by lower id first.
std::vector<int32_t> finite_ids_descending(std::span<const float> logits);

// Softmax over logits[ids] in double (max subtracted): probabilities in the order of `ids`.
std::vector<double> softmax_of(std::span<const float> logits, std::span<const int32_t> ids);

// Sets every logit not in `kept` to -inf. `kept` holds distinct ids.
void keep_only(std::span<float> logits, std::span<const int32_t> kept);

// Tolerance for "the cumulative mass reaches p": logits arrive in float32 (relative error
// ~6e-8 per probability), so a prefix whose exact mass equals p (HF issue #18976) would
// otherwise be decided by rounding. A prefix whose double-precision mass is >= p - 1e-6
// counts as reaching p.
inline constexpr double kMassTolerance = 1e-6;

// splitmix64 (Steele, Lea, Flood 2014; Vigna's reference constants): 64-bit state, the
// state is the seed itself. uniform() = (next() >> 11) * 2^-53, in [0, 1).
class SplitMix64 {
 public:
  explicit SplitMix64(uint64_t seed) : state_(seed) {}
  uint64_t next() {
    uint64_t z = (state_ += 0x9e3779b97f4a7c15ULL);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
  }
  double uniform() { return static_cast<double>(next() >> 11) * 0x1.0p-53; }
  uint64_t state() const { return state_; }

 private:
  uint64_t state_;
};

// Draws an index i with probability weights[i] / sum(weights) (weights >= 0, sum > 0):
// u = uniform() * sum, the first i whose running sum exceeds u; rounding that runs past the
// end picks the last index with a positive weight.
size_t draw_index(std::span<const double> weights, SplitMix64& rng);

}  // namespace sampler_basic

#endif  // PATCHBAY_PLUGINS_SAMPLER_BASIC_LOGITS_MATH_HPP_
