// core/common/parse_number.hpp: numbers from outside text are whole, in range, or "none" —
// the parsers that replaced std::stoll's family where input reaches them (issue 39: an
// "internal: stoll" is a crash in the user's eyes).
#include "common/parse_number.hpp"

#include <doctest/doctest.h>

#include <cstdint>
#include <limits>

using patchbay::parse_double;
using patchbay::parse_int64;
using patchbay::parse_uint64;

TEST_CASE("parse_int64 takes whole decimal integers within int64") {
  CHECK(parse_int64("0") == int64_t{0});
  CHECK(parse_int64("-42") == int64_t{-42});
  CHECK(parse_int64("9223372036854775807") == std::numeric_limits<int64_t>::max());
  CHECK(parse_int64("-9223372036854775808") == std::numeric_limits<int64_t>::min());
  CHECK_FALSE(parse_int64("9223372036854775808").has_value());  // one past the range
  CHECK_FALSE(parse_int64("99999999999999999999").has_value());
  CHECK_FALSE(parse_int64("").has_value());
  CHECK_FALSE(parse_int64("12abc").has_value());  // partial: std::stoll would say 12
  CHECK_FALSE(parse_int64(" 12").has_value());
  CHECK_FALSE(parse_int64("1.5").has_value());
  CHECK_FALSE(parse_int64("abc").has_value());
}

TEST_CASE("parse_uint64 reads hex hashes and refuses signs and overflow") {
  CHECK(parse_uint64("ffffffffffffffff", 16) == std::numeric_limits<uint64_t>::max());
  CHECK(parse_uint64("00ab", 16) == uint64_t{0xab});
  CHECK_FALSE(parse_uint64("1ffffffffffffffff", 16).has_value());
  CHECK_FALSE(parse_uint64("-1").has_value());
  CHECK_FALSE(parse_uint64("xyz", 16).has_value());
}

TEST_CASE("parse_double reads decimal and scientific numbers, whole") {
  CHECK(parse_double("0.5") == 0.5);
  CHECK(parse_double("-1e-3") == -1e-3);
  CHECK(parse_double("3") == 3.0);
  CHECK_FALSE(parse_double("1e999").has_value());  // beyond double: out of range, not inf
  CHECK_FALSE(parse_double("0.5x").has_value());
  CHECK_FALSE(parse_double("").has_value());
  CHECK_FALSE(parse_double("1.2.3").has_value());
}
