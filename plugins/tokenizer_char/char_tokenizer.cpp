// CharTokenizer: UTF-8 scanning, byte fallback, save/load; see char_tokenizer.hpp.
#include "char_tokenizer.hpp"

#include <algorithm>
#include <cstdio>
#include <fstream>
#include <set>
#include <sstream>

#include "patchbay/component.hpp"
#include "patchbay/files.hpp"
#include "patchbay/special_tokens.hpp"

namespace patchbay_char {
namespace {

constexpr const char* kFileMagic = "patchbay-char";
constexpr int kFileVersion = 1;

uint32_t pack_character(std::string_view bytes) {
  uint32_t key = 0;
  for (unsigned char c : bytes) key = (key << 8) | c;
  return key;
}

}  // namespace

size_t utf8_char_length(std::string_view text, size_t pos) {
  const auto at = [&](size_t i) { return static_cast<unsigned char>(text[i]); };
  const unsigned char lead = at(pos);
  if (lead < 0x80) return 1;
  size_t length = 0;
  uint32_t code = 0;
  if (lead >= 0xC2 && lead <= 0xDF) {
    length = 2;
    code = lead & 0x1F;
  } else if (lead >= 0xE0 && lead <= 0xEF) {
    length = 3;
    code = lead & 0x0F;
  } else if (lead >= 0xF0 && lead <= 0xF4) {
    length = 4;
    code = lead & 0x07;
  } else {
    return 0;  // continuation byte, 0xC0/0xC1 (overlong) or 0xF5..0xFF
  }
  if (pos + length > text.size()) return 0;
  for (size_t i = 1; i < length; ++i) {
    if ((at(pos + i) & 0xC0) != 0x80) return 0;
    code = (code << 6) | (at(pos + i) & 0x3F);
  }
  if (length == 3 && (code < 0x800 || (code >= 0xD800 && code <= 0xDFFF))) return 0;
  if (length == 4 && (code < 0x10000 || code > 0x10FFFF)) return 0;
  return length;
}

CharTokenizer::CharTokenizer(std::vector<std::string> special_tokens)
    : specials_(std::move(special_tokens)) {
  for (size_t i = 0; i < specials_.size(); ++i) {
    if (specials_[i].empty())
      throw patchbay::PluginError(PB_STATUS_INVALID_ARGUMENT,
                                  "special token " + std::to_string(i) + " is empty");
    for (size_t j = 0; j < i; ++j) {
      if (specials_[i] == specials_[j])
        throw patchbay::PluginError(PB_STATUS_INVALID_ARGUMENT,
                                    "special token '" + specials_[i] + "' is listed twice");
    }
  }
  ascii_id_.fill(-1);
}

void CharTokenizer::set_characters(std::vector<std::string> characters) {
  characters_ = std::move(characters);
  ascii_id_.fill(-1);
  multibyte_id_.clear();
  for (size_t i = 0; i < characters_.size(); ++i) {
    const std::string& c = characters_[i];
    if (c.size() == 1) {
      ascii_id_[static_cast<unsigned char>(c[0])] = static_cast<int32_t>(i);
    } else {
      multibyte_id_[pack_character(c)] = static_cast<int32_t>(i);
    }
  }
  trained_ = true;
}

int64_t CharTokenizer::train(std::string_view text) {
  std::set<std::string> distinct;
  for (const patchbay::TextSegment& segment : patchbay::split_at_special_tokens(text, specials_)) {
    if (segment.special_index >= 0) continue;
    const std::string_view part = segment.text;
    bool seen_ascii[128] = {};
    for (size_t pos = 0; pos < part.size();) {
      const size_t length = utf8_char_length(part, pos);
      if (length == 0) {
        ++pos;  // ill-formed byte: covered by its byte token
        continue;
      }
      if (length == 1) {
        const auto c = static_cast<unsigned char>(part[pos]);
        if (!seen_ascii[c]) {
          seen_ascii[c] = true;
          distinct.insert(std::string(1, static_cast<char>(c)));
        }
      } else {
        distinct.insert(std::string(part.substr(pos, length)));
      }
      pos += length;
    }
  }
  // std::set orders by bytes, which for well-formed UTF-8 is code-point order.
  set_characters(std::vector<std::string>(distinct.begin(), distinct.end()));
  return vocab_size();
}

int64_t CharTokenizer::vocab_size() const {
  return trained_ ? static_cast<int64_t>(characters_.size() + 256 + specials_.size()) : 0;
}

int32_t CharTokenizer::special_token_id(size_t index) const {
  if (index >= specials_.size())
    throw patchbay::PluginError(PB_STATUS_OUT_OF_RANGE, "special token index out of range");
  return static_cast<int32_t>(characters_.size() + 256 + index);
}

void CharTokenizer::encode_ordinary(std::string_view text, std::vector<int32_t>& out) const {
  for (size_t pos = 0; pos < text.size();) {
    const auto lead = static_cast<unsigned char>(text[pos]);
    if (lead < 0x80) {
      const int32_t id = ascii_id_[lead];
      out.push_back(id >= 0 ? id : byte_token_id(lead));
      ++pos;
      continue;
    }
    const size_t length = utf8_char_length(text, pos);
    if (length > 0) {
      auto found = multibyte_id_.find(pack_character(text.substr(pos, length)));
      if (found != multibyte_id_.end()) {
        out.push_back(found->second);
        pos += length;
        continue;
      }
      for (size_t i = 0; i < length; ++i) {
        out.push_back(byte_token_id(static_cast<unsigned char>(text[pos + i])));
      }
      pos += length;
      continue;
    }
    out.push_back(byte_token_id(lead));
    ++pos;
  }
}

std::vector<int32_t> CharTokenizer::encode(std::string_view text, bool allow_special) const {
  if (!trained_)
    throw patchbay::PluginError(PB_STATUS_INVALID_ARGUMENT,
                                "char tokenizer has no vocabulary: train or load it first");
  std::vector<int32_t> ids;
  ids.reserve(text.size());
  if (!allow_special) {
    encode_ordinary(text, ids);
    return ids;
  }
  for (const patchbay::TextSegment& segment : patchbay::split_at_special_tokens(text, specials_)) {
    if (segment.special_index >= 0) {
      ids.push_back(special_token_id(static_cast<size_t>(segment.special_index)));
    } else {
      encode_ordinary(segment.text, ids);
    }
  }
  return ids;
}

std::string CharTokenizer::decode(std::span<const int32_t> ids) const {
  std::string bytes;
  bytes.reserve(ids.size());
  const auto chars = static_cast<int64_t>(characters_.size());
  const int64_t size = vocab_size();
  for (int32_t id : ids) {
    if (id < 0 || id >= size) {
      throw patchbay::PluginError(
          PB_STATUS_OUT_OF_RANGE,
          "token id " + std::to_string(id) + " outside [0, " + std::to_string(size) + ")");
    }
    if (id < chars) {
      bytes += characters_[static_cast<size_t>(id)];
    } else if (id < chars + 256) {
      bytes.push_back(static_cast<char>(id - chars));
    } else {
      bytes += specials_[static_cast<size_t>(id - chars - 256)];
    }
  }
  return bytes;
}

void CharTokenizer::save(const std::string& path) const {
  if (!trained_)
    throw patchbay::PluginError(PB_STATUS_INVALID_ARGUMENT,
                                "cannot save a char tokenizer before train or load");
  std::ostringstream text;
  text << kFileMagic << ' ' << kFileVersion << '\n';
  text << "characters " << characters_.size() << '\n';
  for (const std::string& c : characters_) text << patchbay::hex_encode(c) << '\n';
  text << "specials " << specials_.size() << '\n';
  for (const std::string& s : specials_) text << patchbay::hex_encode(s) << '\n';
  text << "end\n";
  patchbay::write_file_atomically(path, text.str());
}

void CharTokenizer::load(const std::string& path) {
  std::ifstream file(path, std::ios::binary);
  if (!file)
    throw patchbay::PluginError(PB_STATUS_IO_ERROR,
                                "cannot open char tokenizer file '" + path + "'");
  auto fail = [&](const std::string& what) {
    throw patchbay::PluginError(PB_STATUS_INVALID_ARGUMENT,
                                "'" + path + "' is not a valid patchbay-char file: " + what);
  };
  std::string magic, keyword, value;
  int version = 0;
  if (!(file >> magic >> version) || magic != kFileMagic) fail("missing 'patchbay-char <version>' header");
  if (version != kFileVersion) fail("version " + std::to_string(version) + ", this plugin reads version 1");
  size_t count = 0;
  if (!(file >> keyword >> count) || keyword != "characters") fail("expected 'characters <count>'");
  // Grown line by line, never sized from the count: a corrupt count must not allocate (a fuzzed
  // 'characters 6674657...' asked for terabytes; tests/fuzz/regressions/fuzz_tokenizer_files).
  std::vector<std::string> characters;
  for (size_t i = 0; i < count; ++i) {
    if (!(file >> value)) fail("character line " + std::to_string(i) + " unreadable");
    characters.push_back(patchbay::hex_decode(value));
    if (characters[i].empty() || utf8_char_length(characters[i], 0) != characters[i].size()) {
      fail("entry " + std::to_string(i) + " is not one well-formed UTF-8 character");
    }
    if (i > 0 && !(characters[i - 1] < characters[i])) fail("characters are not sorted and distinct");
  }
  if (!(file >> keyword >> count) || keyword != "specials") fail("expected 'specials <count>'");
  std::vector<std::string> specials;
  for (size_t i = 0; i < count; ++i) {
    if (!(file >> value)) fail("special token line " + std::to_string(i) + " unreadable");
    specials.push_back(patchbay::hex_decode(value));
  }
  if (!(file >> keyword) || keyword != "end") fail("missing 'end' line (truncated file?)");
  CharTokenizer candidate(std::move(specials));  // validates the specials
  specials_ = std::move(candidate.specials_);
  set_characters(std::move(characters));
}

}  // namespace patchbay_char
