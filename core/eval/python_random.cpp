// CPython's Modules/_randommodule.c (MT19937 by Matsumoto and Nishimura, init_by_array
// seeding) and Lib/random.py's sample(), written from their published algorithms.
#include "eval/python_random.hpp"

#include <cmath>
#include <stdexcept>
#include <unordered_set>

#include "common/error.hpp"

namespace patchbay::eval {
namespace {

constexpr int kN = 624;
constexpr int kM = 397;
constexpr uint32_t kMatrixA = 0x9908b0dfU;
constexpr uint32_t kUpperMask = 0x80000000U;
constexpr uint32_t kLowerMask = 0x7fffffffU;

int bit_length(uint64_t n) {
  int bits = 0;
  while (n != 0) {
    ++bits;
    n >>= 1;
  }
  return bits;
}

}  // namespace

PythonRandom::PythonRandom(uint64_t seed) {
  std::vector<uint32_t> key;
  if (seed == 0) key.push_back(0);
  while (seed != 0) {
    key.push_back(static_cast<uint32_t>(seed & 0xffffffffU));
    seed >>= 32;
  }
  init_by_array(key);
}

void PythonRandom::init_genrand(uint32_t s) {
  state_[0] = s;
  for (int i = 1; i < kN; ++i)
    state_[i] = 1812433253U * (state_[i - 1] ^ (state_[i - 1] >> 30)) + static_cast<uint32_t>(i);
  index_ = kN;
}

void PythonRandom::init_by_array(const std::vector<uint32_t>& key) {
  init_genrand(19650218U);
  int i = 1;
  size_t j = 0;
  const int length = static_cast<int>(key.size());
  for (int k = kN > length ? kN : length; k > 0; --k) {
    state_[i] = (state_[i] ^ ((state_[i - 1] ^ (state_[i - 1] >> 30)) * 1664525U)) + key[j] +
                static_cast<uint32_t>(j);
    ++i;
    ++j;
    if (i >= kN) {
      state_[0] = state_[kN - 1];
      i = 1;
    }
    if (j >= key.size()) j = 0;
  }
  for (int k = kN - 1; k > 0; --k) {
    state_[i] = (state_[i] ^ ((state_[i - 1] ^ (state_[i - 1] >> 30)) * 1566083941U)) -
                static_cast<uint32_t>(i);
    ++i;
    if (i >= kN) {
      state_[0] = state_[kN - 1];
      i = 1;
    }
  }
  state_[0] = 0x80000000U;  // MSB is 1, assuring a non-zero initial array
  index_ = kN;
}

void PythonRandom::twist() {
  for (int k = 0; k < kN; ++k) {
    const uint32_t y = (state_[k] & kUpperMask) | (state_[(k + 1) % kN] & kLowerMask);
    state_[k] = state_[(k + kM) % kN] ^ (y >> 1) ^ ((y & 1U) != 0 ? kMatrixA : 0U);
  }
  index_ = 0;
}

uint32_t PythonRandom::next_uint32() {
  if (index_ >= kN) twist();
  uint32_t y = state_[index_++];
  y ^= (y >> 11);
  y ^= (y << 7) & 0x9d2c5680U;
  y ^= (y << 15) & 0xefc60000U;
  y ^= (y >> 18);
  return y;
}

uint32_t PythonRandom::getrandbits(int bits) {
  if (bits < 0 || bits > 32)
    throw Error(ErrorKind::kInternal, "getrandbits: bits must be in [0, 32]");
  if (bits == 0) return 0;
  return next_uint32() >> (32 - bits);
}

int64_t PythonRandom::randbelow(int64_t n) {
  if (n < 1 || n > 0xffffffffLL)
    throw Error(ErrorKind::kInternal, "randbelow: n must be in [1, 2^32)");
  const int bits = bit_length(static_cast<uint64_t>(n));
  int64_t r = getrandbits(bits);
  while (r >= n) r = getrandbits(bits);
  return r;
}

std::vector<int64_t> PythonRandom::sample_indices(int64_t population, int64_t k) {
  if (k < 0 || k > population)
    throw Error(ErrorKind::kInvalidArgument,
                "sample: k = " + std::to_string(k) +
                    " must be in [0, population = " + std::to_string(population) + "]");
  std::vector<int64_t> result(static_cast<size_t>(k));
  // random.py: setsize = 21, plus 4 ** ceil(log(3k, 4)) when k > 5 (a set's table size).
  int64_t setsize = 21;
  if (k > 5)
    setsize += static_cast<int64_t>(
        std::pow(4.0, std::ceil(std::log(static_cast<double>(k * 3)) / std::log(4.0))));
  if (population <= setsize) {
    std::vector<int64_t> pool(static_cast<size_t>(population));
    for (int64_t i = 0; i < population; ++i) pool[static_cast<size_t>(i)] = i;
    for (int64_t i = 0; i < k; ++i) {
      const int64_t j = randbelow(population - i);
      result[static_cast<size_t>(i)] = pool[static_cast<size_t>(j)];
      pool[static_cast<size_t>(j)] = pool[static_cast<size_t>(population - i - 1)];
    }
  } else {
    std::unordered_set<int64_t> selected;
    for (int64_t i = 0; i < k; ++i) {
      int64_t j = randbelow(population);
      while (selected.count(j) != 0) j = randbelow(population);
      selected.insert(j);
      result[static_cast<size_t>(i)] = j;
    }
  }
  return result;
}

}  // namespace patchbay::eval
