// Hashing, per-bucket chunk plan and score bias of LSH attention (see lsh_buckets.hpp).
#include "lsh_buckets.hpp"

#include <algorithm>
#include <cmath>

namespace patchbay_lsh {

namespace {

// argmax over [p; -p] of one projection row p [half]: first the positive half, then the negated
// half (ties: lowest id).
int32_t angular_bucket(const float* proj, int64_t half) {
  int32_t best = 0;
  float best_value = proj[0];
  for (int64_t u = 1; u < half; ++u)
    if (proj[u] > best_value) best_value = proj[u], best = static_cast<int32_t>(u);
  for (int64_t u = 0; u < half; ++u)
    if (-proj[u] > best_value) best_value = -proj[u], best = static_cast<int32_t>(half + u);
  return best;
}

}  // namespace

std::vector<std::vector<int32_t>> hash_rounds(const float* x, int64_t length, int64_t dim,
                                              const std::vector<std::vector<float>>& rotations,
                                              int64_t n_buckets) {
  const int64_t rounds = static_cast<int64_t>(rotations.size());
  std::vector<std::vector<int32_t>> out(static_cast<size_t>(rounds),
                                        std::vector<int32_t>(static_cast<size_t>(length), 0));
  if (n_buckets <= 1) return out;
  const int64_t half = n_buckets / 2, width = rounds * half;
  // [D][rounds * half]: round r's column u at r * half + u.
  std::vector<float> joined(static_cast<size_t>(dim * width));
  for (int64_t r = 0; r < rounds; ++r)
    for (int64_t d = 0; d < dim; ++d)
      for (int64_t u = 0; u < half; ++u)
        joined[static_cast<size_t>(d * width + r * half + u)] =
            rotations[static_cast<size_t>(r)][static_cast<size_t>(d * half + u)];
  std::vector<float> proj(static_cast<size_t>(width));
  for (int64_t t = 0; t < length; ++t) {
    const float* row = x + t * dim;
    std::fill(proj.begin(), proj.end(), 0.f);
    for (int64_t d = 0; d < dim; ++d) {
      const float xd = row[d];
      const float* rot = joined.data() + d * width;
      for (int64_t u = 0; u < width; ++u) proj[static_cast<size_t>(u)] += xd * rot[u];
    }
    for (int64_t r = 0; r < rounds; ++r)
      out[static_cast<size_t>(r)][static_cast<size_t>(t)] =
          angular_bucket(proj.data() + r * half, half);
  }
  return out;
}

std::vector<int32_t> hash_round(const float* x, int64_t length, int64_t dim,
                                const std::vector<float>& rotation, int64_t n_buckets) {
  return hash_rounds(x, length, dim, {rotation}, n_buckets)[0];
}

SlotPlan plan_slots(const std::vector<std::vector<int32_t>>& buckets, int64_t length,
                    const LshSpec& spec) {
  SlotPlan plan;
  const int64_t rounds = static_cast<int64_t>(buckets.size()), c = spec.chunk_len;
  plan.slot_of.assign(static_cast<size_t>(rounds * length), -1);
  plan.bucket.assign(static_cast<size_t>(rounds * length), 0);
  plan.rank.assign(static_cast<size_t>(rounds * length), 0);
  for (int64_t r = 0; r < rounds; ++r) {
    // Counting sort by bucket, stable in position.
    std::vector<std::vector<int64_t>> members(static_cast<size_t>(spec.n_buckets));
    for (int64_t t = 0; t < length; ++t) members[buckets[r][t]].push_back(t);
    for (int64_t bu = 0; bu < spec.n_buckets; ++bu) {
      const std::vector<int64_t>& m = members[static_cast<size_t>(bu)];
      const int64_t padded = (static_cast<int64_t>(m.size()) + c - 1) / c * c;
      for (int64_t n = 0; n < padded; ++n) {
        const bool real = n < static_cast<int64_t>(m.size());
        const int64_t pos = real ? m[n] : -1;
        if (real) {
          const size_t at = static_cast<size_t>(r * length + pos);
          plan.slot_of[at] = static_cast<int64_t>(plan.position.size());
          plan.bucket[at] = static_cast<int32_t>(bu);
          plan.rank[at] = n;
        }
        plan.position.push_back(pos);
        plan.group.push_back(real ? static_cast<int32_t>(r * spec.n_buckets + bu) : -1);
        plan.chunk_in_group.push_back(static_cast<int32_t>(n / c));
      }
    }
  }
  return plan;
}

bool in_window(const SlotPlan& plan, int64_t length, int64_t round, int64_t i, int64_t j,
               int64_t chunk_len) {
  const size_t qi = static_cast<size_t>(round * length + i);
  const size_t kj = static_cast<size_t>(round * length + j);
  if (j > i || plan.bucket[qi] != plan.bucket[kj]) return false;
  const int64_t cq = plan.rank[qi] / chunk_len, ck = plan.rank[kj] / chunk_len;
  return ck == cq || ck == cq - 1;
}

void fill_bias(const SlotPlan& plan, int64_t length, int64_t slots, const LshSpec& spec,
               float* bias) {
  const int64_t c = spec.chunk_len, chunks = slots / c;
  const int64_t own = static_cast<int64_t>(plan.position.size());
  const int64_t rounds = spec.n_hashes;
  auto at = [&](int64_t slot, auto member) -> int64_t {
    return slot < own ? static_cast<int64_t>((plan.*member)[static_cast<size_t>(slot)]) : -1;
  };
  for (int64_t ch = 0; ch < chunks; ++ch)
    for (int64_t a = 0; a < c; ++a) {
      const int64_t qslot = ch * c + a;
      const int64_t i = at(qslot, &SlotPlan::position), gi = at(qslot, &SlotPlan::group);
      float* row = bias + (ch * c + a) * 2 * c;
      for (int64_t w = 0; w < 2 * c; ++w) {
        // Window key w: previous chunk (w < c) then own chunk.
        const int64_t kslot = w < c ? (ch - 1) * c + w : ch * c + (w - c);
        float value = kMaskedBias;
        if (i >= 0 && kslot >= 0) {
          const int64_t j = at(kslot, &SlotPlan::position), gj = at(kslot, &SlotPlan::group);
          const bool same_group = gj == gi;
          const bool previous_ok = w >= c || (kslot < own && plan.chunk_in_group[kslot] + 1 ==
                                                                 plan.chunk_in_group[qslot]);
          if (j >= 0 && same_group && previous_ok && j <= i) {
            value = j == i ? kSelfBias : 0.f;
            if (spec.dedup && rounds > 1 && j != i) {
              int64_t count = 0;
              for (int64_t r = 0; r < rounds; ++r)
                count += in_window(plan, length, r, i, j, c) ? 1 : 0;
              value -= std::log(static_cast<float>(count));
            }
          }
        }
        row[w] = value;
      }
    }
}

}  // namespace patchbay_lsh
