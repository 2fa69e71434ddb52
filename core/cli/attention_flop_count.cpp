// Counted FLOPs of each attention kind (attention_flop_count.hpp): the formulas of the header,
// one function per kind.
#include "cli/attention_flop_count.hpp"

#include <algorithm>
#include <cmath>

namespace patchbay::cli {
namespace {

double d(int64_t v) { return static_cast<double>(v); }

int64_t config_int(const ConfigIntLookup& config, const std::string& key, int64_t fallback) {
  const std::optional<int64_t> v = config(key);
  return v ? *v : fallback;
}

// Forward FLOP of the input projection C -> input_width (q, k, v side by side) and of the
// output projection C -> C: 2 (B T) C width each.
double projection_flop(const AttentionFlopShape& s, double input_width) {
  const double rows = d(s.batch) * d(s.length), c = d(s.heads) * d(s.head_dim);
  return 2 * rows * c * input_width + 2 * rows * c * c;
}

AttentionFlops with_backward(double forward, double forward_without_gradient = 0) {
  return AttentionFlops{forward + forward_without_gradient, 2 * forward};
}

AttentionFlops dense_flops(const ConfigIntLookup& config, const AttentionFlopShape& s) {
  const int64_t kv_heads = std::max<int64_t>(config_int(config, "n_kv_heads", 0), 0);
  const double kv_width = d(kv_heads > 0 ? kv_heads : s.heads) * d(s.head_dim);
  const double c = d(s.heads) * d(s.head_dim);
  const double pairs = visible_pairs(s.length, config_int(config, "window", 0), s.causal);
  return with_backward(projection_flop(s, c + 2 * kv_width) +
                       4 * d(s.batch) * d(s.heads) * d(s.head_dim) * pairs);
}

// Linear attention with e features per head (e = D for `linear`): numerator
// sum_j (phi(q) . phi(k_j)) v_j as a [e, D] state updated and read at each position (2 e D
// each), normaliser phi(q) . sum_j phi(k_j) (2 e).
double linear_core_flop(const AttentionFlopShape& s, double features) {
  const double bht = d(s.batch) * d(s.heads) * d(s.length);
  return bht * (4 * features * d(s.head_dim) + 2 * features);
}

AttentionFlops linear_flops(const AttentionFlopShape& s) {
  const double c = d(s.heads) * d(s.head_dim);
  return with_backward(projection_flop(s, 3 * c) + linear_core_flop(s, d(s.head_dim)));
}

AttentionFlops performer_flops(const ConfigIntLookup& config, const AttentionFlopShape& s) {
  int64_t m = config_int(config, "nb_features", 0);
  if (m <= 0)  // the plugin's default: floor(D ln D), at least 1
    m = std::max<int64_t>(
        1, static_cast<int64_t>(std::floor(d(s.head_dim) * std::log(d(s.head_dim)))));
  const double c = d(s.heads) * d(s.head_dim), bht = d(s.batch) * d(s.heads) * d(s.length);
  const double feature_maps = 2 * (2 * bht * d(s.head_dim) * d(m));  // q omega^T, k omega^T
  return with_backward(projection_flop(s, 3 * c) + feature_maps + linear_core_flop(s, d(m)));
}

AttentionFlops lsh_flops(const ConfigIntLookup& config, const AttentionFlopShape& s) {
  const double rounds = d(config_int(config, "n_hashes", 2)),
               chunk = d(config_int(config, "chunk_len", 32));
  const double buckets = d(config_int(config, "n_buckets", 8));
  const double c = d(s.heads) * d(s.head_dim), bht = d(s.batch) * d(s.heads) * d(s.length);
  // Shared QK: the input projection makes qk and v (2C wide).
  const double attention = rounds * 4 * bht * (2 * chunk) * d(s.head_dim);
  const double hashing = rounds * 2 * bht * d(s.head_dim) * (buckets / 2);
  return with_backward(projection_flop(s, 2 * c) + attention, hashing);
}

AttentionFlops linformer_flops(const ConfigIntLookup& config, const AttentionFlopShape& s) {
  const double k = d(std::min(config_int(config, "k", 64), s.length));
  const double c = d(s.heads) * d(s.head_dim), bhd = d(s.batch) * d(s.heads) * d(s.head_dim);
  const double compress = 2 * (2 * bhd * k * d(s.length));  // E K and F V: [k, T] x [T, D]
  return with_backward(projection_flop(s, 3 * c) + compress + 4 * bhd * d(s.length) * k);
}

}  // namespace

double visible_pairs(int64_t t, int64_t window, bool causal) {
  const int64_t w = window > 0 ? std::min(window, t) : t;
  // Causal: query i sees min(i + 1, w) keys. Two-sided: min(i, w - 1) before, itself, and
  // min(t - 1 - i, w - 1) after.
  double pairs = 0;
  if (causal) {
    // i < w: i + 1 keys (sum w (w + 1) / 2); i >= w: w keys.
    pairs = d(w) * d(w + 1) / 2 + d(t - w) * d(w);
  } else {
    for (int64_t i = 0; i < t; ++i) pairs += d(std::min(i, w - 1) + 1 + std::min(t - 1 - i, w - 1));
  }
  return pairs;
}

std::optional<AttentionFlops> attention_flops(const std::string& kind,
                                              const ConfigIntLookup& config,
                                              const AttentionFlopShape& shape) {
  if (kind == "dense") return dense_flops(config, shape);
  if (kind == "linear") return linear_flops(shape);
  if (kind == "performer") return performer_flops(config, shape);
  if (kind == "lsh") return lsh_flops(config, shape);
  if (kind == "linformer") return linformer_flops(config, shape);
  return std::nullopt;
}

}  // namespace patchbay::cli
