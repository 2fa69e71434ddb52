// Deterministic test data for the indexing-kernel tests: a fixed-seed generator so every
// run checks the same inputs, and small helpers that fill buffers from it.
#pragma once

#include <cstdint>
#include <random>
#include <vector>

namespace patchbay::kernels::testing {

inline std::vector<float> random_floats(size_t count, uint32_t seed, float low = -2.0f,
                                        float high = 2.0f) {
  std::mt19937 generator(seed);
  std::uniform_real_distribution<float> distribution(low, high);
  std::vector<float> values(count);
  for (auto& v : values) v = distribution(generator);
  return values;
}

// Integers in [0, limit) (inclusive of repeats), as Index.
template <class Index>
std::vector<Index> random_ids(size_t count, int64_t limit, uint32_t seed) {
  std::mt19937 generator(seed);
  std::uniform_int_distribution<int64_t> distribution(0, limit - 1);
  std::vector<Index> ids(count);
  for (auto& id : ids) id = static_cast<Index>(distribution(generator));
  return ids;
}

inline double dot(const std::vector<float>& a, const std::vector<float>& b) {
  double sum = 0.0;
  for (size_t i = 0; i < a.size(); ++i) sum += double(a[i]) * double(b[i]);
  return sum;
}

}  // namespace patchbay::kernels::testing
