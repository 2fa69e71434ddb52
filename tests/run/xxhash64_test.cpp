// XXH64 against values from the reference library (libxxhash 0.8.1, XXH64(data, len, seed)),
// and the streaming form equal to the one-shot one however the input is split.
#include "run/xxhash64.hpp"

#include <doctest/doctest.h>

#include <string>
#include <vector>

using namespace patchbay::run;

namespace {
std::span<const std::byte> bytes_of(const std::string& s) {
  return std::as_bytes(std::span<const char>(s.data(), s.size()));
}
std::string pattern_771() {  // bytes 0..255 three times, then "xyz"
  std::string s;
  for (int r = 0; r < 3; ++r)
    for (int i = 0; i < 256; ++i) s.push_back(static_cast<char>(i));
  return s + "xyz";
}
}  // namespace

TEST_CASE("xxhash64 equals the reference library on short, stripe-sized and long inputs") {
  CHECK(xxhash64(bytes_of("")) == 0xef46db3751d8e999ull);
  CHECK(xxhash64(bytes_of("a")) == 0xd24ec4f1a98c6e5bull);
  CHECK(xxhash64(bytes_of("abc")) == 0x44bc2cf5ad770999ull);
  CHECK(xxhash64(bytes_of("0123456789abcdef0123456789abcdef0123456789")) == 0xa76190c3acf08a1cull);
  CHECK(xxhash64(bytes_of(pattern_771())) == 0xe921a1b45bd779f8ull);
  CHECK(xxhash64(bytes_of(""), 7) == 0x95f0626f6f0a4409ull);
  CHECK(xxhash64(bytes_of("abc"), 7) == 0x9e755206156676d7ull);
  CHECK(xxhash64(bytes_of(pattern_771()), 7) == 0xb63555d1bf05377full);
}

TEST_CASE("streaming xxhash64 does not depend on how the bytes are split") {
  const std::string text = pattern_771();
  for (std::size_t piece : {1u, 3u, 7u, 31u, 32u, 33u, 100u}) {
    Xxhash64 h;
    for (std::size_t at = 0; at < text.size(); at += piece)
      h.update(bytes_of(text.substr(at, piece)));
    INFO("pieces of " << piece);
    CHECK(h.digest() == 0xe921a1b45bd779f8ull);
  }
  CHECK(hex64(0xe921a1b45bd779f8ull) == "e921a1b45bd779f8");
  CHECK(hex64(0x1ull) == "0000000000000001");
}
