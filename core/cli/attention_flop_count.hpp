// The FLOPs `patchbay bench attention` counts for one forward + backward of an attention layer
// of each kind, so that its time becomes a rate comparable with a GEMM's. Each kind's formula is
// the work its definition needs (written beside its complexity in the plugin's README), not what
// a kernel happens to do: recomputation (the flash backward's second QK^T) and padding are not
// counted, element-wise work (feature maps' exp, softmax, masks) is not counted, and
// a product of 2 m n k FLOP forward costs 4 m n k backward (dX and dW), so backward = 2 x
// forward for every product. Projections (the layer's input and output linear maps) are
// included, as the bench times them.
//
// Counts (B batch, T length, H heads, D head dim, C = H D; forward, then x 3 for fwd + bwd):
//   dense      2BTC(C + 2 Hkv D) + 2BTC^2   + 4 B H D P          P = visible (query, key) pairs
//   linear     8BTC^2 + B H T (4 D^2 + 2 D)                       numerator + normaliser
//   performer  8BTC^2 + B H T (4 m D + 2 m) + 2 x 2 B H T D m     + feature maps q, k (m features)
//   lsh        6BTC^2 + r 4 B H T (2c) D    + hashing r 2 B H T D (nb/2), forward only
//   linformer  8BTC^2 + 4 B H T k D + 2 x 2 B H k T D             (E K, F V projections)
// P: causal sum_i min(i + 1, w), bidirectional sum_i |{j : |i - j| < w}|, w = window or T.
// Hashing has no gradient (argmax), so it is charged once. `sparse` has no formula here: its
// pairs depend on the layout the plugin builds, which the bench cannot see.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>

namespace patchbay::cli {

struct AttentionFlopShape {
  int64_t batch = 1, length = 1, heads = 1, head_dim = 1;
  bool causal = true;
};

// The value of an INT key of the kind's resolved config (defaults included), or nullopt when
// the kind has no such key.
using ConfigIntLookup = std::function<std::optional<int64_t>(const std::string& key)>;

struct AttentionFlops {
  double forward = 0;   // FLOP of one forward
  double backward = 0;  // FLOP of its backward
  double total() const { return forward + backward; }
};

// nullopt for a kind without a formula (sparse, third-party kinds).
std::optional<AttentionFlops> attention_flops(const std::string& kind,
                                              const ConfigIntLookup& config,
                                              const AttentionFlopShape& shape);

// Visible (query, key) pairs of a self-attention of length t: causal (key j <= query i) or
// two-sided, limited to |i - j| < window when window > 0.
double visible_pairs(int64_t t, int64_t window, bool causal);

}  // namespace patchbay::cli
