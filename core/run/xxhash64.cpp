// XXH64 as specified in xxHash's doc/xxhash_spec.md (version 0.1.1), little-endian reads.
#include "run/xxhash64.hpp"

#include <cstring>

namespace patchbay::run {
namespace {

constexpr uint64_t kPrime1 = 0x9E3779B185EBCA87ull;
constexpr uint64_t kPrime2 = 0xC2B2AE3D27D4EB4Full;
constexpr uint64_t kPrime3 = 0x165667B19E3779F9ull;
constexpr uint64_t kPrime4 = 0x85EBCA77C2B2AE63ull;
constexpr uint64_t kPrime5 = 0x27D4EB2F165667C5ull;

uint64_t rotl(uint64_t x, int r) { return (x << r) | (x >> (64 - r)); }

uint64_t read64(const unsigned char* p) {
  uint64_t v = 0;
  for (int i = 7; i >= 0; --i) v = (v << 8) | p[i];
  return v;
}

uint64_t read32(const unsigned char* p) {
  uint64_t v = 0;
  for (int i = 3; i >= 0; --i) v = (v << 8) | p[i];
  return v;
}

uint64_t round_lane(uint64_t acc, uint64_t input) {
  acc += input * kPrime2;
  return rotl(acc, 31) * kPrime1;
}

uint64_t merge_lane(uint64_t hash, uint64_t lane) {
  hash ^= round_lane(0, lane);
  return hash * kPrime1 + kPrime4;
}

}  // namespace

Xxhash64::Xxhash64(uint64_t seed) : seed_(seed) {
  lanes_[0] = seed + kPrime1 + kPrime2;
  lanes_[1] = seed + kPrime2;
  lanes_[2] = seed;
  lanes_[3] = seed - kPrime1;
}

void Xxhash64::update(std::span<const std::byte> bytes) {
  const auto* p = reinterpret_cast<const unsigned char*>(bytes.data());
  std::size_t n = bytes.size();
  total_ += n;
  if (buffered_ > 0) {  // complete the pending stripe first
    const std::size_t take = std::min(n, sizeof buffer_ - buffered_);
    std::memcpy(buffer_ + buffered_, p, take);
    buffered_ += take;
    p += take;
    n -= take;
    if (buffered_ < sizeof buffer_) return;
    for (int i = 0; i < 4; ++i) lanes_[i] = round_lane(lanes_[i], read64(buffer_ + 8 * i));
    buffered_ = 0;
  }
  for (; n >= 32; p += 32, n -= 32)
    for (int i = 0; i < 4; ++i) lanes_[i] = round_lane(lanes_[i], read64(p + 8 * i));
  std::memcpy(buffer_, p, n);
  buffered_ = n;
}

uint64_t Xxhash64::digest() const {
  uint64_t hash;
  if (total_ >= 32) {
    hash = rotl(lanes_[0], 1) + rotl(lanes_[1], 7) + rotl(lanes_[2], 12) + rotl(lanes_[3], 18);
    for (uint64_t lane : lanes_) hash = merge_lane(hash, lane);
  } else {
    hash = seed_ + kPrime5;
  }
  hash += total_;
  const unsigned char* p = buffer_;
  std::size_t n = buffered_;
  for (; n >= 8; p += 8, n -= 8)
    hash = rotl(hash ^ round_lane(0, read64(p)), 27) * kPrime1 + kPrime4;
  if (n >= 4) {
    hash = rotl(hash ^ (read32(p) * kPrime1), 23) * kPrime2 + kPrime3;
    p += 4;
    n -= 4;
  }
  for (; n > 0; ++p, --n) hash = rotl(hash ^ (*p * kPrime5), 11) * kPrime1;
  hash ^= hash >> 33;
  hash *= kPrime2;
  hash ^= hash >> 29;
  hash *= kPrime3;
  hash ^= hash >> 32;
  return hash;
}

uint64_t xxhash64(std::span<const std::byte> bytes, uint64_t seed) {
  Xxhash64 h(seed);
  h.update(bytes);
  return h.digest();
}

std::string hex64(uint64_t value) {
  static const char kDigits[] = "0123456789abcdef";
  std::string text(16, '0');
  for (int i = 15; i >= 0; --i, value >>= 4)
    text[static_cast<std::size_t>(i)] = kDigits[value & 15];
  return text;
}

}  // namespace patchbay::run
