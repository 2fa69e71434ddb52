// XXH64 (Yann Collet's xxHash, 64-bit variant, seed 0 by default): the checksum of a
// checkpoint's data section. It runs at memory speed (four independent 64-bit lanes per 32-byte
// stripe), so verifying a multi-gigabyte checkpoint costs a fraction of reading it; FNV-1a,
// used for small files elsewhere, goes a byte at a time. Values equal the reference
// implementation's XXH64() (tests/run/xxhash64_test.cpp holds values from libxxhash).
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <string>

namespace patchbay::run {

// Streaming form: update() with the bytes in order, digest() at any time (it does not end the
// stream). Equal to xxhash64(all bytes) however the bytes are split between calls.
class Xxhash64 {
 public:
  explicit Xxhash64(uint64_t seed = 0);
  void update(std::span<const std::byte> bytes);
  uint64_t digest() const;

 private:
  uint64_t lanes_[4];
  unsigned char buffer_[32];  // bytes of an incomplete stripe
  std::size_t buffered_ = 0;
  uint64_t total_ = 0;
  uint64_t seed_;
};

uint64_t xxhash64(std::span<const std::byte> bytes, uint64_t seed = 0);

// 16 lowercase hex digits, the form stored in checkpoint metadata.
std::string hex64(uint64_t value);

}  // namespace patchbay::run
