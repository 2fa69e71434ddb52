// The host-side MoE planner (plugins/ffn_moe/dispatch_plan.cpp): capacity rounding, drop
// counts and grouping on hand-built routings, and the causal priority order.
#include "dispatch_plan.hpp"

#include <doctest/doctest.h>

#include <stdexcept>
#include <vector>

using patchbay_ffn_moe::DispatchPlan;
using patchbay_ffn_moe::expert_capacity;
using patchbay_ffn_moe::plan_dispatch;

TEST_CASE("capacity is ceil(factor * tokens * k / experts), at least 1, without float noise") {
  CHECK(expert_capacity(8, 1, 2, 1.0) == 4);
  CHECK(expert_capacity(8, 1, 2, 1.25) == 5);
  CHECK(expert_capacity(10, 1, 4, 1.0) == 3);   // 2.5 rounds up
  CHECK(expert_capacity(10, 1, 1, 1.1) == 11);  // 1.1 * 10 = 11.000000000000002 in doubles
  CHECK(expert_capacity(6, 2, 4, 1.0) == 3);    // k counts: 12 assignments over 4 experts
  CHECK(expert_capacity(1, 2, 8, 2.0) == 1);    // 0.5 -> 1: a lone decode token is never dropped
  CHECK(expert_capacity(3, 1, 8, 0.01) == 1);
  CHECK_THROWS_AS(expert_capacity(3, 1, 8, 0.0), std::invalid_argument);
}

TEST_CASE("a hand-built routing: groups, offsets, drops in position-major order") {
  // B = 2, T = 3, k = 1, E = 2; every token picks expert 0 except (b1, t1) -> 1.
  //   token n = b*T + t:   n0 (b0,t0)=0  n1 (b0,t1)=0  n2 (b0,t2)=0  n3 (b1,t0)=0  n4 (b1,t1)=1  n5
  //   (b1,t2)=0
  const std::vector<int64_t> choices = {0, 0, 0, 0, 1, 0};
  // Capacity 3: expert 0 receives, in priority order t0: n0, n3; t1: n1; t2: n2, n5.
  const DispatchPlan plan = plan_dispatch(choices, 2, 3, 1, 2, 3);
  CHECK(plan.routed == std::vector<int64_t>{5, 1});
  CHECK(plan.dropped == 2);
  CHECK(plan.offsets == std::vector<int64_t>{0, 3, 4});
  CHECK(plan.sorted_tokens == std::vector<int64_t>{0, 3, 1, 4});
  CHECK(plan.sorted_slots == std::vector<int64_t>{0, 3, 1, 4});
  // n2 and n5 (position 2, the latest) are the dropped ones: row M = 4.
  CHECK(plan.slot_rows == std::vector<int64_t>{0, 2, 4, 1, 3, 4});

  const DispatchPlan dropless = plan_dispatch(choices, 2, 3, 1, 2, -1);
  CHECK(dropless.dropped == 0);
  CHECK(dropless.kept() == 6);
  CHECK(dropless.sorted_tokens == std::vector<int64_t>{0, 3, 1, 2, 5, 4});
}

TEST_CASE("top-2 with capacity: a token's second choice competes at its own position") {
  // B = 1, T = 3, k = 2, E = 3: choices (t0: 0, 1) (t1: 1, 0) (t2: 0, 2); capacity 1.
  const DispatchPlan plan = plan_dispatch({0, 1, 1, 0, 0, 2}, 1, 3, 2, 3, 1);
  // t0 takes expert 0 and 1; t1's both choices are full; t2 gets only expert 2.
  CHECK(plan.dropped == 3);
  CHECK(plan.offsets == std::vector<int64_t>{0, 1, 2, 3});
  CHECK(plan.sorted_tokens == std::vector<int64_t>{0, 0, 2});
  CHECK(plan.slot_rows == std::vector<int64_t>{0, 1, 3, 3, 3, 2});
}

TEST_CASE("a later position never changes what an earlier position gets") {
  // Every choice of the last position of every sequence is changed: the rows of all earlier
  // slots (kept or dropped, and which expert) stay the same.
  const int64_t batch = 3, seq = 5, k = 2, experts = 4;
  std::vector<int64_t> choices;
  for (int64_t n = 0; n < batch * seq; ++n) {
    choices.push_back(n % experts);
    choices.push_back((n * 3 + 1) % experts == n % experts ? (n + 1) % experts
                                                           : (n * 3 + 1) % experts);
  }
  const DispatchPlan before = plan_dispatch(choices, batch, seq, k, experts, 3);
  std::vector<int64_t> changed = choices;
  for (int64_t b = 0; b < batch; ++b) {
    const int64_t n = b * seq + seq - 1;
    changed[static_cast<size_t>(n * k)] = 0;
    changed[static_cast<size_t>(n * k + 1)] = 1;
  }
  const DispatchPlan after = plan_dispatch(changed, batch, seq, k, experts, 3);
  for (int64_t b = 0; b < batch; ++b) {
    for (int64_t t = 0; t + 1 < seq; ++t) {
      for (int64_t j = 0; j < k; ++j) {
        const size_t slot = static_cast<size_t>((b * seq + t) * k + j);
        const bool kept_before = before.slot_rows[slot] < before.kept();
        const bool kept_after = after.slot_rows[slot] < after.kept();
        CHECK(kept_before == kept_after);
      }
    }
  }
  CHECK(before.dropped > 0);  // the capacity bites, so the check above means something
}

TEST_CASE("bad routings are refused with the id and the range") {
  CHECK_THROWS_WITH_AS(plan_dispatch({0, 5}, 1, 2, 1, 4, -1), doctest::Contains("outside [0, 4)"),
                       std::invalid_argument);
  CHECK_THROWS_AS(plan_dispatch({0, 1, 2}, 1, 2, 1, 4, -1), std::invalid_argument);
}
