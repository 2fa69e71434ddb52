// Unicode general categories from a generated table (unicode_categories_data.cpp, Unicode 16.0,
// the version Hugging Face `tokenizers` 0.23.3 classifies with), independent of the Unicode
// tables of the PCRE2 the plugin links (Debian 12's 10.42 has Unicode 14, which made letters and
// digits added in Unicode 15-16 split differently from `tokenizers`).
//
// Used two ways: pcre2_pattern_of() writes \p{L}, \p{N}, \p{Lu}, ... out as explicit ranges from
// these runs, and tests classify code points directly. Regenerate the data with
// scripts/tokenizers/gen_unicode_categories.py (command in its docstring).
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string_view>
#include <vector>

namespace patchbay_bpe::unicode {

// The order of the generator's CATEGORIES list; Cn is "unassigned".
// clang-format off
enum class GeneralCategory : uint8_t {
  Lu, Ll, Lt, Lm, Lo, Mn, Mc, Me, Nd, Nl, No, Pc, Pd, Ps, Pe,
  Pi, Pf, Po, Sm, Sc, Sk, So, Zs, Zl, Zp, Cc, Cf, Cs, Co, Cn
};
// clang-format on

// Code points [first, next run's first) have `category`; runs are sorted, start at 0 and
// cover up to U+10FFFF; adjacent runs differ in category.
struct CategoryRun {
  uint32_t first;
  GeneralCategory category;
};

extern const char* const kUnicodeVersion;  // "16.0.0"
extern const CategoryRun kCategoryRuns[];
extern const size_t kCategoryRunCount;

// Code points [first, last] had category `before` in the baseline Unicode version (14.0.0, the
// tables of Debian 12's PCRE2) and have `now` (Cn before = newly assigned).
struct ChangedRange {
  uint32_t first;
  uint32_t last;
  GeneralCategory now;
  GeneralCategory before;
};
extern const char* const kBaselineUnicodeVersion;  // "14.0.0"
extern const ChangedRange kChangedSinceBaseline[];
extern const size_t kChangedSinceBaselineCount;

// An inclusive range of code points.
struct CodePointRange {
  uint32_t first;
  uint32_t last;
  bool operator==(const CodePointRange&) const = default;
};

// Hugging Face's Digits pre-tokenizer asks Rust's char::is_numeric, whose tables are the Rust
// toolchain's (Unicode 17.0 in `tokenizers` 0.23.3): Nd|Nl|No of that version, which is
// Unicode 16.0's \p{N} plus these ranges.
extern const char* const kDigitsUnicodeVersion;  // "17.0.0"
extern const CodePointRange kDigitsAdditions[];
extern const size_t kDigitsAdditionsCount;

// Category of a code point (binary search over the runs); Cn above U+10FFFF.
GeneralCategory general_category(uint32_t code_point);

// Two-letter name of a category ("Lu").
std::string_view category_name(GeneralCategory category);

// The code points of a general-category property as Oniguruma and PCRE2 spell it in \p{...}:
// a one-letter major class ("L", "N", ...), a two-letter category ("Lu", "Nd", ...), or "LC" /
// "L&" (Lu | Ll | Lt). Sorted, disjoint, non-adjacent ranges. std::nullopt for any other name
// (scripts, binary properties, long names: those stay with PCRE2's own tables).
std::optional<std::vector<CodePointRange>> category_ranges(std::string_view property);

// What a baseline-version \p{property} lacks: the code points that entered `property` since the
// baseline (sorted, merged), and whether any left it (then \p{property} plus additions is not
// exact: U+1171E left Mn in Unicode 16). std::nullopt where category_ranges() has none.
struct BaselineDelta {
  std::vector<CodePointRange> added;
  bool any_removed = false;
};
std::optional<BaselineDelta> delta_since_baseline(std::string_view property);

// The code points 0..U+10FFFF not in `ranges` (sorted, disjoint, non-adjacent), same form.
std::vector<CodePointRange> complement(const std::vector<CodePointRange>& ranges);

}  // namespace patchbay_bpe::unicode
