// Counter-based random numbers (Philox4x32-10): value i of a draw depends only on (seed,
// offset + i), so results are identical for any thread count and can be generated in
// parallel. A Generator hands out disjoint counter ranges to successive draws.
#pragma once

#include <cstdint>

namespace patchbay::engine {

struct Philox4x32 {
  // Four 32-bit random words for `counter` under `key`.
  static void generate(uint64_t counter, uint64_t key, uint32_t out[4]);
};

class Generator {
 public:
  explicit Generator(uint64_t seed = 0) : seed_(seed) {}
  uint64_t seed() const { return seed_; }
  uint64_t offset() const { return offset_; }
  void set_state(uint64_t seed, uint64_t offset) {
    seed_ = seed;
    offset_ = offset;
  }
  // Reserves `count` 32-bit words; returns the first counter block (4 words per block).
  uint64_t reserve(uint64_t count) {
    uint64_t first = offset_;
    offset_ += (count + 3) / 4;
    return first;
  }

 private:
  uint64_t seed_;
  uint64_t offset_ = 0;  // next unused counter block
};

// Uniform float in [0, 1) from a 32-bit word (24 high bits).
inline float uint32_to_unit_float(uint32_t x) {
  return static_cast<float>(x >> 8) * (1.0f / 16777216.0f);
}

}  // namespace patchbay::engine
