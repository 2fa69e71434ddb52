// sample: weights w_i = exp(z_i - z_max) in double over the finite logits in id order, one
// uniform draw u in [0,1) (splitmix64, 53 bits), the first id whose running weight exceeds
// u * sum(w). One generator step per select().
#include "sample.hpp"

#include <cmath>
#include <vector>

namespace sampler_basic {
namespace {

constexpr size_t kBlock = 16;

// Whether any of z[0 .. kBlock) is not -inf; branch-free, so it vectorises.
SAMPLER_BASIC_ISA_CLONES bool any_finite(const float* z) {
  int any = 0;
  for (size_t j = 0; j < kBlock; ++j) any |= static_cast<int>(z[j] != -INFINITY);
  return any != 0;
}

}  // namespace

int32_t Sample::select(std::span<const float> logits) {
  check_logits(logits, "sample");
  const float max_z = max_logit(logits);  // no NaN (checked)
  if (!std::isfinite(max_z)) {
    throw patchbay::PluginError(PB_STATUS_INVALID_ARGUMENT,
                                "sample: no finite logit; every token was removed");
  }
  // Weights for the finite logits only, ids ascending (after top_k 40 of 50K: the draw was a
  // pass of exp, sum and scan over 50K doubles, most of them zeros). The draw sees the same
  // positive weights in the same order as over the whole vocabulary, where each -inf added an
  // exact 0 to the sum and was skipped by the scan, so the same id comes out.
  ids_.clear();
  weights_.clear();
  const auto keep = [&](size_t i) {
    ids_.push_back(static_cast<int32_t>(i));
    weights_.push_back(std::exp(static_cast<double>(logits[i]) - static_cast<double>(max_z)));
  };
  size_t i = 0;
  for (; i + kBlock <= logits.size(); i += kBlock) {
    if (!any_finite(logits.data() + i)) continue;  // the usual case after a truncation
    for (size_t j = i; j < i + kBlock; ++j)
      if (logits[j] != -INFINITY) keep(j);
  }
  for (; i < logits.size(); ++i)
    if (logits[i] != -INFINITY) keep(i);
  return ids_[draw_index(weights_, rng_)];
}

}  // namespace sampler_basic
