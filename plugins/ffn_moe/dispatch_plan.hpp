// The host-side half of mixture-of-experts dispatch: from each token's chosen experts to the
// index lists that group the tokens by expert (a counting sort: histogram + offsets, O(N·k)),
// with the capacity limit applied in a causal priority order. Plain C++, no tensors, so the
// arithmetic is testable on hand-built routings (tests/ffn_moe/dispatch_plan_test.cpp).
//
// Priority order (README "Causality"): assignments are visited position-major —
//   for t in [0, T): for b in [0, B): for j in [0, k): token n = b·T + t, its j-th choice
// — and an expert keeps the first `capacity` assignments it receives. What position t gets
// therefore depends only on positions <= t (of every sequence in the batch), never on a later
// position: no batch-prioritised (probability-sorted) routing.
#pragma once

#include <cstdint>
#include <vector>

namespace patchbay_ffn_moe {

// Capacity per expert: ceil(capacity_factor · tokens · k / experts), at least 1. The product
// is rounded up (DeepSpeed's rule; MegaBlocks floors) so that factor 1 with perfectly balanced
// routing drops nothing even when tokens·k is not a multiple of experts; a relative tolerance
// of 1e-9 keeps float noise (1.1 · 10 = 11.000000000000002) from adding a slot.
int64_t expert_capacity(int64_t tokens, int64_t k, int64_t experts, double capacity_factor);

struct DispatchPlan {
  int64_t tokens = 0;    // N = B·T
  int64_t k = 0;         // choices per token
  int64_t experts = 0;   // E
  int64_t capacity = 0;  // per expert; -1: dropless
  // Kept assignments grouped by expert (expert e's rows are [offsets[e], offsets[e+1])),
  // within an expert in priority order. M = offsets[E] = kept assignments.
  std::vector<int64_t> offsets;        // [E + 1]
  std::vector<int64_t> sorted_tokens;  // [M] token index n
  std::vector<int64_t> sorted_slots;   // [M] n·k + j (row of the gate [N·k])
  // For every slot n·k + j: its row in the sorted order, or M when the assignment was dropped
  // (the row M of the padded expert output is zero, so a dropped choice adds nothing).
  std::vector<int64_t> slot_rows;  // [N·k]
  std::vector<int64_t> routed;     // [E] assignments chosen per expert, before capacity
  int64_t dropped = 0;             // assignments over capacity
  int64_t kept() const { return offsets.empty() ? 0 : offsets.back(); }
};

// choices [N·k] (row-major [B, T, k]): expert ids in [0, E), distinct within a token.
// capacity < 0: dropless. Throws std::invalid_argument on ids out of range or bad sizes.
DispatchPlan plan_dispatch(const std::vector<int64_t>& choices, int64_t batch, int64_t seq_len,
                           int64_t k, int64_t experts, int64_t capacity);

}  // namespace patchbay_ffn_moe
