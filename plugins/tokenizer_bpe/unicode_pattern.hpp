// Pre-tokenizer patterns from Hugging Face (Oniguruma) syntax to PCRE2 syntax, with the Unicode
// classes of `tokenizers` rather than those of the PCRE2 the plugin links.
//
// Two translations:
//  - \s and \S become Unicode's White_Space set (the 25 code points Oniguruma and Python's
//    `regex` match); PCRE2's own \s also matches U+180E (White_Space until Unicode 6.3).
//  - \p{X}, \P{X}, \p{^X} for a general category X (L, N, Lu, Nd, ... see
//    unicode::category_ranges) classify by Unicode 16.0 (unicode_categories_data.cpp), the
//    version `tokenizers` 0.23.3 uses; Debian 12's PCRE2 10.42 has Unicode 14, so letters and
//    digits added in Unicode 15-16 (Kawi, Nag Mundari, Garay, CJK Extensions H/I, Kaktovik
//    numerals, U+1C89/1C8A, U+A7CB-A7DC, ...) split differently from `tokenizers` before this.
//    When PCRE2's tables are a version whose differences to 16.0 the generator knows (14.0,
//    15.0, 15.1, 16.0), PCRE2's property is kept and the code points added since 14.0 are added
//    beside the atom: \p{L} -> (?:\p{L}|[<added>]), [^\s\p{L}] -> (?:(?![<added>])[^\s\p{L}]).
//    That keeps PCRE2's fast property test (a fully explicit class of 677 ranges made PCRE2's
//    JIT ~10x slower on non-ASCII text) and its speed on ASCII (one class [\p{L}<added>] made
//    LLaMA 3's pattern ~0.6x on English). Otherwise, and for negations inside a class and for
//    categories a code point left since 14.0 (Mn), every range is written out.
// Other \p{...} names (scripts, binary properties, long names) stay with PCRE2's tables, and so
// does any \p inside a case-insensitive group ((?i) would also match the case partners of
// explicit ranges); none of the patterns Patchbay ships has either.
#pragma once

#include <string>
#include <string_view>

namespace patchbay_bpe {

// GPT-2's pattern as Hugging Face's ByteLevel(use_regex = true) writes it.
inline constexpr const char* kGpt2HfPattern =
    "'s|'t|'re|'ve|'m|'ll|'d| ?\\p{L}+| ?\\p{N}+| ?[^\\s\\p{L}\\p{N}]+|\\s+(?!\\S)|\\s+";

enum class CategorySpelling {
  kBaselinePlusAdditions,  // PCRE2's \p{X} or the ranges added since Unicode 14.0 (where exact)
  kExplicitRanges,         // every range of X written out
  kPcre2Tables,            // \p{X} left to PCRE2's own tables: what Patchbay did before issue 39
                           // (Unicode 14 on Debian 12); for comparisons and benchmarks only
};

// kBaselinePlusAdditions when the linked PCRE2 reports Unicode tables 14.0.0, 15.0.0, 15.1.0 or
// 16.0.0; kExplicitRanges otherwise.
CategorySpelling category_spelling_for_linked_pcre2();

// Oniguruma-style pattern -> PCRE2 pattern (see above). Throws PluginError(INVALID_ARGUMENT) for
// \S inside a character class.
std::string pcre2_pattern_of(std::string_view hf_pattern);
std::string pcre2_pattern_of(std::string_view hf_pattern, CategorySpelling spelling);

// The pattern (Oniguruma syntax) of Hugging Face's Digits pre-tokenizer: one numeric character
// (individual_digits) or a run of them, numeric as Rust's char::is_numeric in `tokenizers`
// 0.23.3 (Unicode 17.0): "[\p{N}\x{11DE0}-\x{11DE9}\x{16FF4}-\x{16FF6}]" (+ "+"). Saved back
// to a tokenizer.json as a Split with this pattern, it matches the same characters there.
std::string hf_digits_pattern(bool individual_digits);

}  // namespace patchbay_bpe
