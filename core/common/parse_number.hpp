// Numbers read from text that came from outside (files, command lines, checkpoint metadata):
// the whole text must be the number and it must fit, or the answer is "none" — never an
// exception from std::stoll's family, which reaches the user as "internal: stoll". Each
// caller turns "none" into its own error naming the file, the field and what was expected.
#pragma once

#include <charconv>
#include <cstdint>
#include <optional>
#include <string_view>

namespace patchbay {

// A decimal (or base-`base`) integer filling all of `text`; none when empty, partial or out
// of int64's range. A leading '+' is refused, as from_chars does.
inline std::optional<int64_t> parse_int64(std::string_view text, int base = 10) {
  int64_t value = 0;
  const auto [end, error] = std::from_chars(text.data(), text.data() + text.size(), value, base);
  if (text.empty() || error != std::errc() || end != text.data() + text.size()) return std::nullopt;
  return value;
}

// As parse_int64 for unsigned 64-bit values (a hash written in hex: base 16).
inline std::optional<uint64_t> parse_uint64(std::string_view text, int base = 10) {
  uint64_t value = 0;
  const auto [end, error] = std::from_chars(text.data(), text.data() + text.size(), value, base);
  if (text.empty() || error != std::errc() || end != text.data() + text.size()) return std::nullopt;
  return value;
}

// A decimal or scientific floating-point number filling all of `text` (inf/nan spelled out are
// accepted, as from_chars does: callers that need finite values check); none when empty,
// partial or beyond double's range.
inline std::optional<double> parse_double(std::string_view text) {
  double value = 0;
  const auto [end, error] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (text.empty() || error != std::errc() || end != text.data() + text.size()) return std::nullopt;
  return value;
}

}  // namespace patchbay
