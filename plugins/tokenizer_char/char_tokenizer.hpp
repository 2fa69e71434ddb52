// Character-level tokenizer with byte fallback, as a plain C++ class;
// char_component.cpp adapts it to the SDK's patchbay::Tokenizer.
//
// Ids: [0, C) the distinct UTF-8 characters seen in training, sorted by their bytes
// (= by code point); [C, C + 256) one token per byte value; then the special tokens in
// configuration order. Encode reads one well-formed UTF-8 character at a time and emits
// its character id; a character not in the vocabulary, or any byte of an ill-formed
// sequence, is emitted as byte tokens. So every byte string round-trips exactly.
// vocab_size() is 0 until train() or load().
//
// Thread safety: encode/decode/queries are const and may run concurrently; train/load need
// exclusive access. Errors are patchbay::PluginError carrying their status code
// (INVALID_ARGUMENT, OUT_OF_RANGE, IO_ERROR); the SDK adapter turns them into statuses.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

namespace patchbay_char {

// Length of the well-formed UTF-8 character starting at text[pos] (1..4), or 0 when the
// bytes there are not one (stray continuation, overlong form, surrogate, > U+10FFFF,
// truncated sequence).
size_t utf8_char_length(std::string_view text, size_t pos);

class CharTokenizer {
 public:
  explicit CharTokenizer(std::vector<std::string> special_tokens = {"<|endoftext|>"});

  // Vocabulary = the distinct well-formed characters of `text` (special-token strings in
  // it are skipped). Returns the new vocab size.
  int64_t train(std::string_view text);

  std::vector<int32_t> encode(std::string_view text, bool allow_special) const;
  std::string decode(std::span<const int32_t> ids) const;

  int64_t vocab_size() const;
  size_t character_count() const { return characters_.size(); }
  const std::vector<std::string>& special_tokens() const { return specials_; }
  int32_t special_token_id(size_t index) const;
  int32_t byte_token_id(unsigned char byte) const {
    return static_cast<int32_t>(characters_.size() + byte);
  }

  // Text format, versioned; temporary file then rename. See README.md.
  void save(const std::string& path) const;
  void load(const std::string& path);

 private:
  void set_characters(std::vector<std::string> characters);
  void encode_ordinary(std::string_view text, std::vector<int32_t>& out) const;

  bool trained_ = false;
  std::vector<std::string> characters_;  // sorted, distinct, each one well-formed character
  std::vector<std::string> specials_;
  std::array<int32_t, 128> ascii_id_{};  // -1 when the ASCII character is not in the vocab
  std::unordered_map<uint32_t, int32_t> multibyte_id_;  // key: the character's bytes packed
};

}  // namespace patchbay_char
