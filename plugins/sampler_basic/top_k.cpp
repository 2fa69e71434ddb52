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

void TopK::apply(std::span<float> logits, std::span<const int32_t>, size_t) {
  check_logits(logits, "top_k");
  if (k_ >= logits.size()) return;
  std::vector<float> sorted(logits.begin(), logits.end());
  std::nth_element(sorted.begin(), sorted.begin() + static_cast<std::ptrdiff_t>(k_ - 1),
                   sorted.end(), std::greater<float>());
  const float kth_value = sorted[k_ - 1];
  for (float& z : logits) {
    if (z < kth_value) z = -INFINITY;
  }
}

}  // namespace sampler_basic
