// Shared arithmetic of the sampler_basic components: input checks, the descending candidate
// order every truncation uses, a softmax over the finite logits in double, the splitmix64
// generator and categorical draws. Everything here is deterministic and platform-independent
// (no std:: distributions), so equal seeds give equal tokens everywhere.
#ifndef PATCHBAY_PLUGINS_SAMPLER_BASIC_LOGITS_MATH_HPP_
#define PATCHBAY_PLUGINS_SAMPLER_BASIC_LOGITS_MATH_HPP_

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <span>
#include <vector>

#include "patchbay/component.hpp"

// The loops over the whole vocabulary run once per token per component. On x86-64 with GCC
// they are built for AVX-512, AVX2 and the baseline, and the loader picks the one this CPU
// runs (target_clones); every clone gives the same bits (compares, counts, maxima and IEEE
// divisions, nothing reassociated).
#if defined(__GNUC__) && !defined(__clang__) && defined(__x86_64__)
#define SAMPLER_BASIC_ISA_CLONES \
  __attribute__((target_clones("arch=x86-64-v4", "arch=x86-64-v3", "default")))
#else
#define SAMPLER_BASIC_ISA_CLONES
#endif

namespace sampler_basic {

// Throws patchbay::PluginError (PB_STATUS_INVALID_ARGUMENT) naming `who` if a logit is NaN or +inf.
void check_logits(std::span<const float> logits, const char* who);

// The largest logit (-inf when every logit is -inf). Precondition: no NaN (check_logits).
float max_logit(std::span<const float> logits);

// Throws patchbay::PluginError (PB_STATUS_INVALID_ARGUMENT) naming `who` if a history id lies
// outside [0, vocab) or prompt_len > history.size().
void check_history(std::span<const int32_t> history, size_t prompt_len, size_t vocab,
                   const char* who);

// The part of history a penalty looks at: the generated part only unless include_prompt,
// then its last `last_n` ids (0 = all of it).
std::span<const int32_t> history_window(std::span<const int32_t> history, size_t prompt_len,
                                        bool include_prompt, int64_t last_n);

// Ids whose logit is finite, ascending.
std::vector<int32_t> finite_ids(std::span<const float> logits);

// The softmax normaliser over the finite logits, in double: p(z) = exp(z - max) / total.
// With no finite logit, total is 0.
struct SoftmaxNorm {
  double max_logit = -INFINITY;
  double total = 0.0;
  double prob(float z) const { return std::exp(static_cast<double>(z) - max_logit) / total; }
};
SoftmaxNorm softmax_norm(std::span<const float> logits);

// Descending logit, ties by lower id first: a strict total order, so every sort by it is
// deterministic.
struct ByLogitDescending {
  std::span<const float> logits;
  bool operator()(int32_t a, int32_t b) const {
    return logits[a] > logits[b] || (logits[a] == logits[b] && a < b);
  }
};

// Ids sorted by `Less` on demand: at(i) sorts only as far as rank i needs, in blocks that
// grow 4x (nth_element then sort of the block), so a truncation that stops after a few
// hundred of 50k candidates costs O(V) instead of O(V log V). `Less` must be a strict total
// order. Measured reason: a full sort per token dominated top_p / typical / mirostat.
template <class Less>
class LazySorted {
 public:
  LazySorted(std::vector<int32_t> ids, Less less) : ids_(std::move(ids)), less_(less) {}
  size_t size() const { return ids_.size(); }
  int32_t at(size_t rank) {
    if (rank >= sorted_) extend(rank + 1);
    return ids_[rank];
  }

 private:
  void extend(size_t needed) {
    const size_t want = std::min(ids_.size(), std::max({needed, size_t{64}, 4 * sorted_}));
    const auto begin = ids_.begin() + static_cast<std::ptrdiff_t>(sorted_);
    const auto end = ids_.begin() + static_cast<std::ptrdiff_t>(want);
    if (want < ids_.size()) std::nth_element(begin, end, ids_.end(), less_);
    std::sort(begin, end, less_);
    sorted_ = want;
  }

  std::vector<int32_t> ids_;
  Less less_;
  size_t sorted_ = 0;
};

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
