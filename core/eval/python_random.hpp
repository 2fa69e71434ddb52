// Python's `random.Random` as far as lm-evaluation-harness's few-shot sampler uses it: the
// Mersenne Twister seeded from an integer exactly as CPython seeds it (init_by_array over the
// seed's 32-bit words), getrandbits(k), _randbelow and Random.sample(population, k) with
// CPython 3.11's two branches (pool for small populations, rejection set for large ones).
// lm-eval draws few-shot examples with `Random(seed).sample(docs, n)` (seed 1234 by default,
// one generator per task, advanced item by item), so the same seed draws the same examples
// here as there.
#pragma once

#include <array>
#include <cstdint>
#include <vector>

namespace patchbay::eval {

class PythonRandom {
 public:
  // Random(seed) for a non-negative seed below 2^64 (CPython: key = 32-bit words of |seed|).
  explicit PythonRandom(uint64_t seed);

  uint32_t next_uint32();          // genrand_uint32
  uint32_t getrandbits(int bits);  // 0 <= bits <= 32
  int64_t randbelow(int64_t n);    // uniform in [0, n), n >= 1 (rejection on bit_length(n) bits)
  // Random.sample(range(population), k): k distinct indices in draw order; 0 <= k <= population.
  std::vector<int64_t> sample_indices(int64_t population, int64_t k);

 private:
  void init_genrand(uint32_t s);
  void init_by_array(const std::vector<uint32_t>& key);
  void twist();

  std::array<uint32_t, 624> state_{};
  int index_ = 625;
};

}  // namespace patchbay::eval
