// Shared by the sorted-chunk kernel tests (test_sorted_chunk_kernel.cpp,
// test_sorted_chunk_bf16.cpp): random inputs, real LSH slot plans (plan_slots of lsh_buckets.cpp)
// padded across rows, the problem of one call and the kernel's forward with lse from its two-part
// stat.
#pragma once

#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <random>
#include <vector>

#include "lsh_buckets.hpp"
#include "patchbay/kernels/attention_flash.hpp"
#include "patchbay/kernels/sorted_chunk_attention.hpp"

namespace sorted_chunk_test {

namespace kn = patchbay::kernels;
using patchbay_lsh::LshSpec;

inline std::vector<float> random_vector(size_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> dist(-1.f, 1.f);
  std::vector<float> v(n);
  for (float& x : v) x = dist(rng);
  return v;
}

inline double max_abs_diff(const std::vector<float>& a, const std::vector<float>& b) {
  REQUIRE(a.size() == b.size());
  double worst = 0;
  for (size_t i = 0; i < a.size(); ++i) worst = std::max(worst, std::fabs(double(a[i]) - b[i]));
  return worst;
}

inline std::vector<kn::KernelIsa> runnable_isas() {
  std::vector<kn::KernelIsa> out;
  for (kn::KernelIsa isa : {kn::KernelIsa::generic, kn::KernelIsa::avx2, kn::KernelIsa::avx512})
    if (kn::kernel_isa_supported(isa)) out.push_back(isa);
  return out;
}

// Random buckets [rows][rounds][T] (a later position's bucket drawn after the earlier ones).
using Buckets = std::vector<std::vector<std::vector<int32_t>>>;
inline Buckets random_buckets(int64_t rows, int64_t length, const LshSpec& spec, uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_int_distribution<int32_t> bucket(0, int32_t(spec.n_buckets - 1));
  Buckets out(size_t(rows), std::vector<std::vector<int32_t>>(size_t(spec.n_hashes)));
  for (auto& row : out)
    for (auto& round : row)
      for (int64_t t = 0; t < length; ++t) round.push_back(bucket(rng));
  return out;
}

// The plans of every row, padded to the longest (position -1, group -1).
struct Plans {
  std::vector<patchbay_lsh::SlotPlan> rows;
  std::vector<int32_t> position, group;
  int64_t slots = 0;
};
inline Plans make_plans(const Buckets& buckets, int64_t length, const LshSpec& spec) {
  Plans p;
  for (const auto& b : buckets) {
    p.rows.push_back(patchbay_lsh::plan_slots(b, length, spec));
    p.slots = std::max(p.slots, int64_t(p.rows.back().position.size()));
  }
  for (const auto& plan : p.rows)
    for (int64_t s = 0; s < p.slots; ++s) {
      const bool own = s < int64_t(plan.position.size());
      p.position.push_back(own ? int32_t(plan.position[size_t(s)]) : -1);
      p.group.push_back(own ? plan.group[size_t(s)] : -1);
    }
  return p;
}

struct Problem {
  kn::SortedChunkAttentionShape shape;
  LshSpec spec;
  Plans plans;
  std::vector<float> q, k, v, dout;
};

inline Problem make_problem(int64_t rows, int64_t length, int64_t dim, const LshSpec& spec,
                            uint32_t seed) {
  Problem p;
  p.spec = spec;
  p.plans = make_plans(random_buckets(rows, length, spec, seed), length, spec);
  p.shape.rows = rows, p.shape.length = length, p.shape.head_dim = dim;
  p.shape.slots = p.plans.slots, p.shape.chunk_len = spec.chunk_len;
  p.shape.scale = 0.7f, p.shape.self_bias = patchbay_lsh::kSelfBias, p.shape.dedup = spec.dedup;
  const size_t n = size_t(rows * length * dim);
  p.q = random_vector(n, seed + 1), p.k = random_vector(n, seed + 2);
  p.v = random_vector(n, seed + 3), p.dout = random_vector(n, seed + 4);
  return p;
}

struct Forward {
  std::vector<float> out, stat, lse;  // lse = stat[0] + stat[1], in double then rounded
};
inline Forward forward(const Problem& p) {
  const size_t positions = size_t(p.shape.rows * p.shape.length);
  Forward f{std::vector<float>(p.q.size(), 7.f), std::vector<float>(2 * positions, 7.f), {}};
  kn::sorted_chunk_attention_forward(p.shape, p.q.data(), p.k.data(), p.v.data(),
                                     p.plans.position.data(), p.plans.group.data(), f.out.data(),
                                     f.stat.data());
  for (size_t i = 0; i < positions; ++i)
    f.lse.push_back(float(double(f.stat[2 * i]) + f.stat[2 * i + 1]));
  return f;
}

}  // namespace sorted_chunk_test
