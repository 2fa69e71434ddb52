// Host-side bookkeeping of Reformer LSH attention (Kitaev et al. 2020): hashing, the sorted and
// chunked slot layout, and the additive score bias of every (query slot, key slot) pair. No
// tensor op here: plain vectors, so the plan is exact and testable on its own.
//
// Hash (angular LSH, trax hash_vecs): for round r with a Gaussian R_r [D, n_buckets / 2],
// h_r(x) = argmax([x R_r ; -x R_r]) (n_buckets even); n_buckets == 1 puts everything in bucket 0.
// Sort by (round, bucket, position). Chunking is PER BUCKET: each bucket's positions (in
// position order) are cut into chunks of chunk_len and padded to a whole chunk, so a chunk
// holds one bucket only and "the previous chunk" is the previous chunk of the same bucket.
// A query attends to the keys of its own and the previous chunk with position <= its own.
// Why per bucket: with global chunking (trax) the chunk boundaries depend on how many FUTURE
// tokens fall into lower buckets, so outputs at t change with tokens > t (a causal leak)
// and no KV cache can reproduce the forward. Per-bucket chunks depend on the past only.
//
// Bias of (query i, key j) in round r, added to the score q_i . k_j / |k_j|:
//   -1e9  key slot is padding, belongs to another (round, bucket), or j > i (causal mask on
//         the ORIGINAL positions)
//   -1e5  j == i (self only when nothing else is visible, trax's value)
//   -log(count(i, j)) when dedup: count = rounds r' in which j is in i's window, so that a pair
//         found in several rounds weighs once after the rounds are combined.
#pragma once

#include <cstdint>
#include <vector>

namespace patchbay_lsh {

inline constexpr float kMaskedBias = -1e9f;
inline constexpr float kSelfBias = -1e5f;

struct LshSpec {
  int64_t n_buckets = 8;  // 1 or even
  int64_t n_hashes = 2;   // rounds
  int64_t chunk_len = 32;
  bool dedup = true;
};

// Buckets of T vectors x [T, D] (row-major) for one round: rotation R [D, n_buckets / 2].
std::vector<int32_t> hash_round(const float* x, int64_t length, int64_t dim,
                                const std::vector<float>& rotation, int64_t n_buckets);

// Every round at once, as one product x [T, D] * [R_0 | R_1 | ...] [D, rounds * n_buckets / 2]
// (d outer, the rotations' columns inner: a vectorised GEMM row by row), then the argmax per
// round. Each projection is summed in the same order as hash_round's, so both give the same
// buckets bit for bit (decoding hashes one token with hash_round). rotations: [rounds][D * half].
std::vector<std::vector<int32_t>> hash_rounds(const float* x, int64_t length, int64_t dim,
                                              const std::vector<std::vector<float>>& rotations,
                                              int64_t n_buckets);

// The slot plan of one (batch, head) row: every round's positions grouped by bucket, padded
// per bucket to whole chunks.
struct SlotPlan {
  std::vector<int64_t> position;        // [slots], -1 for padding
  std::vector<int32_t> group;           // [slots], round * n_buckets + bucket (-1 for padding)
  std::vector<int32_t> chunk_in_group;  // [slots], chunk index inside its bucket
  std::vector<int64_t> slot_of;         // [n_hashes * T]: slot of (round, position)
  std::vector<int32_t> bucket;          // [n_hashes * T]
  std::vector<int64_t> rank;            // [n_hashes * T]: rank of the position inside its bucket
};
// buckets: [n_hashes][T]. Slots = sum over (round, bucket) of ceil(count / c) * c.
SlotPlan plan_slots(const std::vector<std::vector<int32_t>>& buckets, int64_t length,
                    const LshSpec& spec);

// Is key position j (j <= i) in query i's window of round r? (same bucket, chunk of j one
// of chunk(i) - 1, chunk(i)).
bool in_window(const SlotPlan& plan, int64_t length, int64_t round, int64_t i, int64_t j,
               int64_t chunk_len);

// Bias [slots / c, c, 2c] of a plan padded to `slots` (>= its own size): window keys are the
// previous chunk (first c) then the own chunk (last c).
void fill_bias(const SlotPlan& plan, int64_t length, int64_t slots, const LshSpec& spec,
               float* bias);

}  // namespace patchbay_lsh
