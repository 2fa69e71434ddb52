// A sequence of regex splits, the pre-tokenizers of byte-level BPE tokenizers after GPT-2:
// LLaMA 3 / Qwen 2 (`Split` with their own pattern, then a ByteLevel step without a regex),
// SmolLM / StarCoder (`Digits` with individual_digits, then GPT-2's ByteLevel regex).
//
// Step i splits every piece of step i - 1 into its matches and the gaps between them, in
// order (Hugging Face `tokenizers`' Split with behavior "Isolated", invert false; the
// ByteLevel regex step is the same operation with GPT-2's pattern; llama.cpp applies its
// regex_exprs list the same way). Patterns are written in Hugging Face's (Oniguruma) syntax,
// as tokenizer.json holds them; they are compiled with PCRE2 (UTF, UCP, MATCH_INVALID_UTF,
// JIT) after translation (unicode_pattern.hpp): \s and \S become Unicode's White_Space set
// (what Oniguruma means; PCRE2's own \s also matches U+180E), and general categories such as
// \p{L} and \p{N} classify by Unicode 16.0 as `tokenizers` does. A step that is GPT-2's
// pattern (with or without the final `|\s+`, which only ever matches what would otherwise be
// a one-character gap) runs on Gpt2PreTokenizer's fast path.
//
// Invalid UTF-8: no match covers an ill-formed byte, so such bytes land in gaps; pieces still
// concatenate to the input and every byte string round-trips.
// Thread safety: split() is const and allocates its own match data.
#pragma once

#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "bpe_pretokenizer.hpp"
#include "unicode_pattern.hpp"

namespace patchbay_bpe {

// kGpt2HfPattern and pcre2_pattern_of() (the translation to PCRE2) are in unicode_pattern.hpp.

class PatternPreTokenizer {
 public:
  // Throws PluginError(INVALID_ARGUMENT) naming the pattern PCRE2 refuses, and for an empty list.
  // `spelling` as for Gpt2PreTokenizer (default: the linked PCRE2's; others for comparisons).
  explicit PatternPreTokenizer(std::vector<std::string> hf_patterns,
                               std::optional<CategorySpelling> spelling = std::nullopt);
  ~PatternPreTokenizer();
  PatternPreTokenizer(const PatternPreTokenizer&) = delete;
  PatternPreTokenizer& operator=(const PatternPreTokenizer&) = delete;

  void split(std::string_view text, const std::function<void(std::string_view)>& on_piece) const;
  std::vector<std::string> split_to_vector(std::string_view text) const;
  const std::vector<std::string>& patterns() const { return patterns_; }

 private:
  struct Step {
    void* code = nullptr;  // pcre2_code_8*; null for a GPT-2 step
    bool jit = false;
  };
  void split_step(size_t step, std::string_view text,
                  const std::function<void(std::string_view)>& on_piece) const;

  std::vector<std::string> patterns_;
  std::vector<Step> steps_;
  std::unique_ptr<Gpt2PreTokenizer> gpt2_;  // shared by every GPT-2 step
};

}  // namespace patchbay_bpe
