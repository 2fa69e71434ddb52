// Sparse Transformer (Child et al. 2019) index sets as block layouts. Positions are cut into
// blocks of `block_size` (bs) tokens; with I = i / bs, J = j / bs, L = stride / bs and
// C = summary / bs the sets are the paper's, applied to block indices (bs = 1 gives the
// paper's element sets exactly), always restricted to J <= I, and the kernel adds the
// element-level causal mask j <= i inside the diagonal tile:
//   strided A1 (local):  I - L <= J <= I          (paper: t = max(0, i - l), i.e. l + 1 blocks
//                                                  including the own; the reference code's
//                                                  band_part keeps l - 1 back, one fewer)
//   strided A2:          (I - J) mod L == 0
//   fixed   A1:          J / L == I / L           (the own window of L blocks)
//   fixed   A2:          J mod L in [L - C, L)    (the last C blocks of every window: summaries)
//   local:               strided A1 alone
// Combining (pattern strided or fixed): "union" gives every head A1 u A2; "heads" gives even
// heads A1 and odd heads A2; "alternate" gives layer r the set A^(r mod 2) on every head.
// A layout is int32 [H, nb, nb] (row-major), nb = ceil(T / bs): 1 where the tile is computed.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace patchbay_sparse {

enum class Pattern { strided, fixed, local };
enum class Combine { union_of_sets, separate_heads, alternate_layers };

struct PatternSpec {
  Pattern pattern = Pattern::fixed;
  Combine combine = Combine::union_of_sets;
  int64_t block_size = 16;  // bs
  int64_t stride = 64;      // l, a multiple of bs
  int64_t summary = 16;     // c (fixed only), a multiple of bs, <= l
};

Pattern parse_pattern(const std::string& name);  // throws PluginError on an unknown name
Combine parse_combine(const std::string& name);
// Empty when the spec is usable, else a sentence naming the field and the value.
std::string pattern_spec_error(const PatternSpec& spec);

// Which set (0: A1, 1: A2, 2: union) head h of layer `layer_index` uses.
int set_of_head(const PatternSpec& spec, int64_t layer_index, int64_t head);
// Block-level membership: key block J in the given set of query block I (J <= I assumed).
bool block_allowed(const PatternSpec& spec, int set, int64_t query_block, int64_t key_block);
// Layout [heads, nb, nb] for sequences of `length` positions.
std::vector<int32_t> build_layout(const PatternSpec& spec, int64_t layer_index, int64_t heads,
                                  int64_t length);
// Element-level allowed keys of query i (sorted): the set above with bs applied and j <= i.
// For tests and documentation; O(i).
std::vector<int64_t> allowed_keys(const PatternSpec& spec, int set, int64_t i);

}  // namespace patchbay_sparse
