// LSH hashing and the per-bucket chunk plan against hand-computed answers: argmax([xR; -xR]),
// the (round, bucket, position) order with per-bucket padding, and the bias (causal on
// original positions, self only as a last resort, another bucket's previous chunk masked,
// duplicate pairs counted over rounds).
#include <doctest/doctest.h>

#include <cmath>
#include <vector>

#include "lsh_buckets.hpp"

using namespace patchbay_lsh;

TEST_CASE("angular hash is argmax over [xR; -xR]") {
  // D = 2, n_buckets = 4, R = identity: bucket 0 if x0 largest, 1 if x1, 2 if -x0, 3 if -x1.
  const std::vector<float> rotation = {1, 0, 0, 1};
  const std::vector<float> x = {3, 1, 0.5f, 2, -4, 1, 1, -5};
  CHECK(hash_round(x.data(), 4, 2, rotation, 4) == std::vector<int32_t>{0, 1, 2, 3});
  CHECK(hash_round(x.data(), 4, 2, rotation, 1) == std::vector<int32_t>{0, 0, 0, 0});
}

TEST_CASE("slots: sorted by (round, bucket, position), padded per bucket to whole chunks") {
  LshSpec spec;
  spec.n_buckets = 2;
  spec.n_hashes = 1;
  spec.chunk_len = 2;
  // positions 0..4 in buckets 1, 0, 1, 1, 0 -> bucket 0: {1, 4}; bucket 1: {0, 2, 3, pad}.
  SlotPlan plan = plan_slots({{1, 0, 1, 1, 0}}, 5, spec);
  CHECK(plan.position == std::vector<int64_t>{1, 4, 0, 2, 3, -1});
  CHECK(plan.chunk_in_group == std::vector<int32_t>{0, 0, 0, 0, 1, 1});
  CHECK(plan.slot_of == std::vector<int64_t>{2, 0, 3, 4, 1});
  CHECK(plan.rank == std::vector<int64_t>{0, 0, 1, 2, 1});
  // Bias [3 chunks, 2, 4]: window = previous chunk (2 keys) then own chunk (2 keys).
  std::vector<float> bias(3 * 2 * 4);
  fill_bias(plan, 5, 6, spec, bias.data());
  auto b = [&](int ch, int a, int w) { return bias[static_cast<size_t>((ch * 2 + a) * 4 + w)]; };
  // Chunk 0 (bucket 0: positions 1, 4): previous chunk does not exist -> masked.
  CHECK(b(0, 0, 0) == kMaskedBias);
  CHECK(b(0, 0, 2) == kSelfBias);    // 1 sees itself only
  CHECK(b(0, 0, 3) == kMaskedBias);  // 1 must not see 4 (future)
  CHECK(b(0, 1, 2) == 0.f);          // 4 sees 1
  // Chunk 1 (bucket 1: 0, 2): its previous chunk is bucket 0's -> masked.
  CHECK(b(1, 1, 0) == kMaskedBias);
  CHECK(b(1, 1, 1) == kMaskedBias);
  CHECK(b(1, 1, 2) == 0.f);  // 2 sees 0
  // Chunk 2 (bucket 1: 3, pad): 3 sees 0 and 2 in the previous chunk, itself, not padding.
  CHECK(b(2, 0, 0) == 0.f);
  CHECK(b(2, 0, 1) == 0.f);
  CHECK(b(2, 0, 2) == kSelfBias);
  CHECK(b(2, 0, 3) == kMaskedBias);
}

TEST_CASE("dedup subtracts log of the rounds in which a pair is attended") {
  LshSpec spec;
  spec.n_buckets = 2;
  spec.n_hashes = 2;
  spec.chunk_len = 4;
  // Round 0 all in bucket 0; round 1 positions 0, 1 in bucket 0 and 2 in bucket 1.
  SlotPlan plan = plan_slots({{0, 0, 0}, {0, 0, 1}}, 3, spec);
  CHECK(in_window(plan, 3, 0, 2, 0, 4));
  CHECK(!in_window(plan, 3, 1, 2, 0, 4));
  CHECK(in_window(plan, 3, 1, 1, 0, 4));
  std::vector<float> bias(static_cast<size_t>(plan.position.size() / 4 * 4 * 8));
  fill_bias(plan, 3, static_cast<int64_t>(plan.position.size()), spec, bias.data());
  // Round 0's chunk: slots 0..3 = positions 0, 1, 2, pad. Query 1 sees key 0 in both rounds.
  CHECK(bias[(0 * 4 + 1) * 8 + 4] == doctest::Approx(-std::log(2.0)));
  // Query 2 sees key 0 in round 0 only.
  CHECK(bias[(0 * 4 + 2) * 8 + 4] == 0.f);
}
