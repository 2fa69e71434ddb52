// Capacity arithmetic and the counting-sort dispatch plan; see dispatch_plan.hpp.
#include "dispatch_plan.hpp"

#include <cmath>
#include <stdexcept>
#include <string>

namespace patchbay_ffn_moe {

int64_t expert_capacity(int64_t tokens, int64_t k, int64_t experts, double capacity_factor) {
  if (tokens <= 0 || k <= 0 || experts <= 0 || !(capacity_factor > 0)) {
    throw std::invalid_argument(
        "expert_capacity: tokens, k, experts and capacity_factor must be > 0");
  }
  const double exact = capacity_factor * static_cast<double>(tokens) * static_cast<double>(k) /
                       static_cast<double>(experts);
  const auto rounded = static_cast<int64_t>(std::ceil(exact * (1.0 - 1e-9)));
  return rounded < 1 ? 1 : rounded;
}

DispatchPlan plan_dispatch(const std::vector<int64_t>& choices, int64_t batch, int64_t seq_len,
                           int64_t k, int64_t experts, int64_t capacity) {
  const int64_t n_tokens = batch * seq_len;
  if (batch <= 0 || seq_len <= 0 || k <= 0 || experts <= 0 ||
      static_cast<int64_t>(choices.size()) != n_tokens * k) {
    throw std::invalid_argument("plan_dispatch: expected " + std::to_string(n_tokens * k) +
                                " choices (B·T·k) with B, T, k, E > 0, got " +
                                std::to_string(choices.size()));
  }
  DispatchPlan plan;
  plan.tokens = n_tokens;
  plan.k = k;
  plan.experts = experts;
  plan.capacity = capacity;
  plan.routed.assign(static_cast<size_t>(experts), 0);
  plan.slot_rows.assign(choices.size(), -1);

  // Pass 1, in priority order: each kept slot gets its rank within its expert (stored in
  // slot_rows for now); over-capacity slots are marked dropped.
  std::vector<int64_t> kept_count(static_cast<size_t>(experts), 0);
  for (int64_t t = 0; t < seq_len; ++t) {
    for (int64_t b = 0; b < batch; ++b) {
      const int64_t n = b * seq_len + t;
      for (int64_t j = 0; j < k; ++j) {
        const size_t slot = static_cast<size_t>(n * k + j);
        const int64_t e = choices[slot];
        if (e < 0 || e >= experts) {
          throw std::invalid_argument("plan_dispatch: expert id " + std::to_string(e) +
                                      " of token " + std::to_string(n) + " is outside [0, " +
                                      std::to_string(experts) + ")");
        }
        ++plan.routed[static_cast<size_t>(e)];
        int64_t& count = kept_count[static_cast<size_t>(e)];
        if (capacity >= 0 && count >= capacity) {
          ++plan.dropped;
          continue;
        }
        plan.slot_rows[slot] = count++;
      }
    }
  }
  // Offsets: exclusive prefix sum of the kept histogram.
  plan.offsets.assign(static_cast<size_t>(experts) + 1, 0);
  for (int64_t e = 0; e < experts; ++e) {
    plan.offsets[static_cast<size_t>(e) + 1] =
        plan.offsets[static_cast<size_t>(e)] + kept_count[static_cast<size_t>(e)];
  }
  const int64_t kept = plan.offsets.back();
  plan.sorted_tokens.assign(static_cast<size_t>(kept), 0);
  plan.sorted_slots.assign(static_cast<size_t>(kept), 0);
  // Pass 2: rank -> global row; fill the sorted lists.
  for (size_t slot = 0; slot < choices.size(); ++slot) {
    if (plan.slot_rows[slot] < 0) {
      plan.slot_rows[slot] = kept;  // the zero row
      continue;
    }
    const int64_t row = plan.offsets[static_cast<size_t>(choices[slot])] + plan.slot_rows[slot];
    plan.slot_rows[slot] = row;
    plan.sorted_tokens[static_cast<size_t>(row)] = static_cast<int64_t>(slot) / k;
    plan.sorted_slots[static_cast<size_t>(row)] = static_cast<int64_t>(slot);
  }
  return plan;
}

}  // namespace patchbay_ffn_moe
