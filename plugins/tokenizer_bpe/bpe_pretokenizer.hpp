// GPT-2 pre-tokenisation: splits bytes into the pieces BPE merges never cross.
//
// The pattern is GPT-2's (openai/gpt-2 src/encoder.py),
//   's|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+
// translated by pcre2_pattern_of (unicode_pattern.hpp: \s as White_Space, \p{L} and \p{N} by
// Unicode 16.0 as Hugging Face `tokenizers` classifies), compiled with PCRE2 in UTF + UCP mode
// and JIT-compiled.
// Invalid UTF-8 must still round-trip, so the pattern also gets PCRE2_MATCH_INVALID_UTF:
// matches then never contain an invalid sequence, and every byte no match covers (only
// bytes of invalid sequences, since the last two alternatives cover every valid character)
// becomes a one-byte piece of its own. Concatenating the pieces always gives the input.
//
// Thread safety: the compiled pattern is shared read-only; split() allocates its own match
// data, so any number of threads may call split() on one object.
#pragma once

#include <cstddef>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "unicode_pattern.hpp"

namespace patchbay_bpe {

class Gpt2PreTokenizer {
 public:
  // Throws std::runtime_error if PCRE2 refuses the pattern (a build problem, not input).
  // `spelling`: how \p{L}/\p{N} are written for PCRE2 (unicode_pattern.hpp); by default the
  // one for the linked PCRE2 (Unicode 16 classes). Other values are for comparisons.
  explicit Gpt2PreTokenizer(std::optional<CategorySpelling> spelling = std::nullopt);
  ~Gpt2PreTokenizer();
  Gpt2PreTokenizer(const Gpt2PreTokenizer&) = delete;
  Gpt2PreTokenizer& operator=(const Gpt2PreTokenizer&) = delete;

  // Calls on_piece for each piece, in order; the views point into `text`. ASCII stretches
  // take a hand-written path that implements the pattern's alternatives for ASCII exactly
  // (3-4x faster than a PCRE2 call per piece); at any position where a piece could touch a
  // byte >= 0x80 the next piece comes from PCRE2. Tests check split == split_with_pcre2 on
  // random mixed text.
  void split(std::string_view text, const std::function<void(std::string_view)>& on_piece) const;
  // Every piece from PCRE2: the reference the fast path is tested against.
  void split_with_pcre2(std::string_view text,
                        const std::function<void(std::string_view)>& on_piece) const;
  std::vector<std::string> split_to_vector(std::string_view text) const;

  // True when splitting text[0, p) and text[p, n) separately gives exactly the pieces of
  // text. Holds where text[p] is ' ' and text[p+1] an ASCII letter or digit: the space can
  // only open a ' ?\p{L}+' / ' ?\p{N}+' piece, and a whitespace run before it ends at p in
  // both cases (\s+(?!\S) stops one short of a non-space; at the end of a string it takes
  // the whole run, which is the same run). Parallel encode cuts only at such points.
  static bool is_safe_cut(std::string_view text, size_t p);
  // First safe cut at or after `from`, or text.size() if none.
  static size_t next_safe_cut(std::string_view text, size_t from);

  // The PCRE2 pattern compiled (GPT-2's, translated).
  const std::string& pattern() const { return pattern_; }

 private:
  // One PCRE2 match at or after pos; emits skipped invalid bytes and the match; returns
  // the position after them. match_data: pcre2_match_data_8*.
  size_t next_pcre2_piece(const unsigned char* subject, size_t n, size_t pos, void* match_data,
                          std::string_view text,
                          const std::function<void(std::string_view)>& on_piece) const;

  std::string pattern_;
  void* code_ = nullptr;  // pcre2_code_8*
  bool jit_ = false;
};

}  // namespace patchbay_bpe
