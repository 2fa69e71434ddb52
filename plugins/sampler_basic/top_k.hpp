// top_k: keeps the k largest logits, and every token tied with the k-th value (HF
// TopKLogitsWarper: remove z < k-th largest value); k = max(k, min_tokens_to_keep).
#ifndef PATCHBAY_PLUGINS_SAMPLER_BASIC_TOP_K_HPP_
#define PATCHBAY_PLUGINS_SAMPLER_BASIC_TOP_K_HPP_

#include <vector>

#include "patchbay/sampler.hpp"

namespace sampler_basic {

class TopK : public patchbay::Sampler {
 public:
  static constexpr uint64_t kCapabilities = PB_SAMPLER_CAP_PROCESSOR;
  TopK(const patchbay::Host&, const patchbay::ConfigView& config)
      : TopK(config.get_int("k"), config.get_int("min_tokens_to_keep")) {}
  TopK(int64_t k, int64_t min_tokens_to_keep);  // throws unless k >= 1, min_tokens_to_keep >= 1
  void apply(std::span<float> logits, std::span<const int32_t> history, size_t prompt_len) override;

 private:
  float kth_largest(std::span<const float> logits);  // 1 <= k_ < logits.size()

  size_t k_;
  std::vector<float> scratch_;  // kth_largest's heap or copy, kept between calls
};

inline constexpr pb_config_field kTopKFields[] = {
    patchbay::Field::integer("k", "50",
                             "keep the k largest logits and every token tied with the k-th (HF)")
        .range(1, 2147483647),
    patchbay::Field::integer("min_tokens_to_keep", "1", "never keep fewer tokens than this")
        .range(1, 2147483647),
};
inline constexpr pb_component_descriptor kTopK = patchbay::make_sampler_component<TopK>(
    "top_k", "1.0.0", "keeps the k largest logits, ties at the k-th value kept (HF)", kTopKFields);

}  // namespace sampler_basic

#endif  // PATCHBAY_PLUGINS_SAMPLER_BASIC_TOP_K_HPP_
