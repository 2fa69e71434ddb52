// top_k (HF semantics): the k-th largest value v_k counts ties; tokens with z < v_k become
// -inf, so every token tied at v_k is kept. With fewer than k finite logits, nothing changes.
#include "top_k.hpp"

#include <algorithm>
#include <cmath>
#include <functional>
#include <string>
#include <vector>

#include "logits_math.hpp"

namespace sampler_basic {

TopK::TopK(int64_t k, int64_t min_tokens_to_keep) {
  if (k < 1 || min_tokens_to_keep < 1) {
    throw patchbay::PluginError(PB_STATUS_INVALID_ARGUMENT,
                                "top_k: k (" + std::to_string(k) + ") and min_tokens_to_keep (" +
                                    std::to_string(min_tokens_to_keep) + ") must be >= 1");
  }
  k_ = static_cast<size_t>(std::max(k, min_tokens_to_keep));
}

// The k-th largest value of the multiset `logits` (1 <= k < size). Small k (the usual 20-100
// of a 50K vocabulary): one pass keeping the k largest seen in a min-heap, whose root is the
// answer; most logits lose one comparison with the root (measured at k = 40, V = 50257: the
// whole decoding sampler chain 0.59 -> see docs/BENCHMARKS.md). Large k: nth_element on a copy.
float TopK::kth_largest(std::span<const float> logits) {
  const auto k = static_cast<std::ptrdiff_t>(k_);
  if (k_ * 16 > logits.size()) {
    scratch_.assign(logits.begin(), logits.end());
    std::nth_element(scratch_.begin(), scratch_.begin() + (k - 1), scratch_.end(),
                     std::greater<float>());
    return scratch_[k_ - 1];
  }
  scratch_.assign(logits.begin(), logits.begin() + k);
  std::make_heap(scratch_.begin(), scratch_.end(), std::greater<float>());  // root = minimum
  for (size_t i = k_; i < logits.size(); ++i) {
    const float z = logits[i];
    if (!(z > scratch_.front())) continue;  // a tie with the root leaves the k-th value as is
    std::pop_heap(scratch_.begin(), scratch_.end(), std::greater<float>());
    scratch_.back() = z;
    std::push_heap(scratch_.begin(), scratch_.end(), std::greater<float>());
  }
  return scratch_.front();
}

namespace {

SAMPLER_BASIC_ISA_CLONES void remove_below(float* z, size_t n, float threshold) {
  for (size_t i = 0; i < n; ++i) z[i] = z[i] < threshold ? -INFINITY : z[i];
}

}  // namespace

void TopK::apply(std::span<float> logits, std::span<const int32_t>, size_t) {
  check_logits(logits, "top_k");
  if (k_ >= logits.size()) return;
  remove_below(logits.data(), logits.size(), kth_largest(logits));
}

}  // namespace sampler_basic
