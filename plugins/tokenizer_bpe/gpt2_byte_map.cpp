// GPT-2 byte <-> character mapping; see gpt2_byte_map.hpp.
#include "gpt2_byte_map.hpp"

#include <array>

namespace patchbay_bpe {
namespace {

bool printable_as_itself(int b) {
  return (b >= '!' && b <= '~') || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE && b <= 0xFF);
}

struct ByteMap {
  std::array<uint32_t, 256> to_codepoint{};
  std::array<int16_t, 512> from_codepoint{};  // every mapped code point is < 0x100 + 68
  ByteMap() {
    from_codepoint.fill(-1);
    uint32_t next_extra = 0x100;
    for (int b = 0; b < 256; ++b) {
      to_codepoint[static_cast<size_t>(b)] =
          printable_as_itself(b) ? static_cast<uint32_t>(b) : next_extra++;
      from_codepoint[to_codepoint[static_cast<size_t>(b)]] = static_cast<int16_t>(b);
    }
  }
};

const ByteMap& byte_map() {
  static const ByteMap map;
  return map;
}

void append_utf8(uint32_t cp, std::string& out) {
  if (cp < 0x80) {
    out.push_back(static_cast<char>(cp));
  } else {  // the mapping only produces code points below 0x800
    out.push_back(static_cast<char>(0xC0 | (cp >> 6)));
    out.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  }
}

}  // namespace

uint32_t gpt2_byte_to_codepoint(unsigned char b) { return byte_map().to_codepoint[b]; }

std::string gpt2_bytes_to_text(std::string_view bytes) {
  std::string text;
  text.reserve(bytes.size() * 2);
  for (char c : bytes) append_utf8(gpt2_byte_to_codepoint(static_cast<unsigned char>(c)), text);
  return text;
}

bool gpt2_text_to_bytes(std::string_view text, std::string& bytes) {
  const ByteMap& map = byte_map();
  bytes.clear();
  bytes.reserve(text.size());
  for (size_t i = 0; i < text.size();) {
    const auto c0 = static_cast<unsigned char>(text[i]);
    uint32_t cp = 0;
    if (c0 < 0x80) {
      cp = c0;
      i += 1;
    } else if ((c0 & 0xE0) == 0xC0 && i + 1 < text.size() &&
               (static_cast<unsigned char>(text[i + 1]) & 0xC0) == 0x80) {
      cp = (static_cast<uint32_t>(c0 & 0x1F) << 6) |
           (static_cast<unsigned char>(text[i + 1]) & 0x3F);
      if (cp < 0x80) return false;  // overlong
      i += 2;
    } else {
      return false;  // 3- and 4-byte characters are all outside the mapping
    }
    if (cp >= map.from_codepoint.size() || map.from_codepoint[cp] < 0) return false;
    bytes.push_back(static_cast<char>(map.from_codepoint[cp]));
  }
  return true;
}

}  // namespace patchbay_bpe
