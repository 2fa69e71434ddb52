// Shared arithmetic of the sampler_basic components (see logits_math.hpp).
#include "logits_math.hpp"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <numeric>
#include <string>

namespace sampler_basic {

namespace {

// How many logits are NaN or +inf, in one vectorised pass: 32-bit lane counters (64-bit ones
// held the baseline build to two lanes and a widening shuffle per step), summed per block of
// 2^30 so they cannot wrap.
SAMPLER_BASIC_ISA_CLONES size_t count_nan_or_inf(const float* z, size_t n) {
  constexpr size_t kBlock = size_t{1} << 30;
  size_t total = 0;
  for (size_t begin = 0; begin < n; begin += kBlock) {
    const size_t end = std::min(n, begin + kBlock);
    uint32_t bad = 0;
    for (size_t i = begin; i < end; ++i)
      bad += static_cast<uint32_t>((z[i] != z[i]) | (z[i] == INFINITY));
    total += bad;
  }
  return total;
}

// 16 running maxima in one vector (GCC vector extension: a zmm register in the AVX-512
// clone), folded at the end; GCC vectorises neither one running float maximum (the order
// could change which of -0 and +0 comes out) nor an array of 16. Nothing here depends on the
// sign of a zero maximum (z - max is the same number either way).
SAMPLER_BASIC_ISA_CLONES float max_of(const float* z, size_t n) {
  typedef float Lanes __attribute__((vector_size(64)));
  constexpr size_t kLanes = 16;
  Lanes lanes = Lanes{} - INFINITY;
  size_t i = 0;
  for (; i + kLanes <= n; i += kLanes) {
    Lanes v;
    std::memcpy(&v, z + i, sizeof v);
    lanes = v > lanes ? v : lanes;
  }
  float m = -INFINITY;
  for (; i < n; ++i) m = z[i] > m ? z[i] : m;
  for (size_t l = 0; l < kLanes; ++l) m = lanes[l] > m ? lanes[l] : m;
  return m;
}

}  // namespace

float max_logit(std::span<const float> logits) { return max_of(logits.data(), logits.size()); }

void check_logits(std::span<const float> logits, const char* who) {
  if (logits.empty())
    throw patchbay::PluginError(PB_STATUS_INVALID_ARGUMENT, std::string(who) + ": vocab is 0");
  // The offending id is looked for only when there is one.
  const size_t bad = count_nan_or_inf(logits.data(), logits.size());
  for (size_t i = 0; bad > 0 && i < logits.size(); ++i) {
    const float z = logits[i];
    if (std::isnan(z) || z == INFINITY) {
      throw patchbay::PluginError(PB_STATUS_INVALID_ARGUMENT,
                                  std::string(who) + ": logit of token " + std::to_string(i) +
                                      " is " + (std::isnan(z) ? "NaN" : "+inf") +
                                      "; logits must be finite or -inf (removed)");
    }
  }
}

void check_history(std::span<const int32_t> history, size_t prompt_len, size_t vocab,
                   const char* who) {
  if (prompt_len > history.size()) {
    throw patchbay::PluginError(PB_STATUS_INVALID_ARGUMENT, std::string(who) + ": prompt_len " +
                                                                std::to_string(prompt_len) +
                                                                " exceeds the history length " +
                                                                std::to_string(history.size()));
  }
  for (size_t i = 0; i < history.size(); ++i) {
    if (history[i] < 0 || static_cast<size_t>(history[i]) >= vocab) {
      throw patchbay::PluginError(PB_STATUS_INVALID_ARGUMENT,
                                  std::string(who) + ": history[" + std::to_string(i) +
                                      "] = " + std::to_string(history[i]) + " lies outside [0, " +
                                      std::to_string(vocab) + ")");
    }
  }
}

std::span<const int32_t> history_window(std::span<const int32_t> history, size_t prompt_len,
                                        bool include_prompt, int64_t last_n) {
  std::span<const int32_t> window = include_prompt ? history : history.subspan(prompt_len);
  if (last_n > 0 && static_cast<size_t>(last_n) < window.size()) {
    window = window.last(static_cast<size_t>(last_n));
  }
  return window;
}

std::vector<int32_t> finite_ids(std::span<const float> logits) {
  std::vector<int32_t> ids;
  ids.reserve(logits.size());
  for (size_t i = 0; i < logits.size(); ++i) {
    if (std::isfinite(logits[i])) ids.push_back(static_cast<int32_t>(i));
  }
  return ids;
}

SoftmaxNorm softmax_norm(std::span<const float> logits) {
  SoftmaxNorm norm;
  for (float z : logits) {
    if (std::isfinite(z)) norm.max_logit = std::max(norm.max_logit, static_cast<double>(z));
  }
  if (!std::isfinite(norm.max_logit)) return norm;
  for (float z : logits) {
    if (std::isfinite(z)) norm.total += std::exp(static_cast<double>(z) - norm.max_logit);
  }
  return norm;
}

void keep_only(std::span<float> logits, std::span<const int32_t> kept) {
  std::vector<char> keep(logits.size(), 0);
  for (int32_t id : kept) keep[id] = 1;
  for (size_t i = 0; i < logits.size(); ++i) {
    if (!keep[i]) logits[i] = -INFINITY;
  }
}

size_t draw_index(std::span<const double> weights, SplitMix64& rng) {
  const double total = std::accumulate(weights.begin(), weights.end(), 0.0);
  const double target = rng.uniform() * total;
  double running = 0.0;
  size_t last_positive = 0;
  for (size_t i = 0; i < weights.size(); ++i) {
    if (weights[i] <= 0.0) continue;
    running += weights[i];
    last_positive = i;
    if (running > target) return i;
  }
  return last_positive;
}

}  // namespace sampler_basic
