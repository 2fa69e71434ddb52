// Hugging Face (Oniguruma) pattern -> PCRE2 pattern with Unicode 16 categories; see the header.
#define PCRE2_CODE_UNIT_WIDTH 8
#include "unicode_pattern.hpp"

#include <pcre2.h>

#include <algorithm>
#include <array>
#include <cstdio>
#include <vector>

#include "patchbay/component.hpp"
#include "unicode_categories.hpp"

namespace patchbay_bpe {
namespace {

// Unicode White_Space, as class contents.
constexpr const char* kWhiteSpace =
    "\\t-\\r \\x{85}\\x{A0}\\x{1680}\\x{2000}-\\x{200A}\\x{2028}\\x{2029}\\x{202F}\\x{205F}"
    "\\x{3000}";

// PCRE2 Unicode table versions whose differences to the generated data are exactly
// kChangedSinceBaseline (checked by the generator's author with unicodedata2 15.0.0 / 15.1.0).
constexpr std::array<std::string_view, 4> kKnownTableVersions = {"14.0.0", "15.0.0", "15.1.0",
                                                                 "16.0.0"};

std::string code_point_escape(uint32_t cp) {
  char buffer[16];
  std::snprintf(buffer, sizeof(buffer), "\\x{%X}", static_cast<unsigned>(cp));
  return buffer;
}

// Class contents for `ranges`, without surrogates (PCRE2 refuses them in UTF mode).
std::string class_contents(const std::vector<unicode::CodePointRange>& ranges) {
  std::string out;
  auto emit = [&](uint32_t first, uint32_t last) {
    if (first > last) return;
    out += code_point_escape(first);
    if (last == first) return;
    if (last > first + 1) out += '-';
    out += code_point_escape(last);
  };
  for (const unicode::CodePointRange& r : ranges) {
    if (r.last < 0xD800 || r.first > 0xDFFF) {
      emit(r.first, r.last);
    } else {
      if (r.first < 0xD800) emit(r.first, 0xD7FF);
      if (r.last > 0xDFFF) emit(0xE000, r.last);
    }
  }
  return out;
}

// Sorted, merged copy of `ranges`.
std::vector<unicode::CodePointRange> merged(std::vector<unicode::CodePointRange> ranges) {
  std::sort(ranges.begin(), ranges.end(),
            [](const auto& x, const auto& y) { return x.first < y.first; });
  std::vector<unicode::CodePointRange> out;
  for (const unicode::CodePointRange& r : ranges) {
    if (!out.empty() && r.first <= out.back().last + 1)
      out.back().last = std::max(out.back().last, r.last);
    else
      out.push_back(r);
  }
  return out;
}

// An atom matching what `atom` (one character: a class or a \p item) matches plus `added`, or
// minus `added` when `negated`. Measured on 2026-11-27 (PCRE2 10.42 JIT, LLaMA 3's pattern):
// the alternation keeps PCRE2's speed on ASCII text, where one class [\p{L}<ranges>] made
// every ASCII character walk the range list (~0.6x).
std::string with_additions(const std::string& atom,
                           const std::vector<unicode::CodePointRange>& added, bool negated) {
  if (added.empty()) return atom;
  std::string out = negated ? "(?:(?![" : "(?:";
  if (!negated) out.append(atom).append("|[");
  out.append(class_contents(merged(added)));
  if (negated) out.append("])").append(atom);
  out.append(negated ? ")" : "])");
  return out;
}

// The translation of one \p{name} / \P{name} (`original` is its text), or `original` itself
// when it is not a general category or is left to PCRE2 (see the header). Inside a class that
// is PCRE2's own \p{name}, and the code points added since the baseline go to
// `class_additions` for the enclosing class to add (with_additions).
std::string category_escape(std::string_view original, std::string name, bool negated,
                            bool in_class, bool caseless, CategorySpelling spelling,
                            std::vector<unicode::CodePointRange>& class_additions) {
  if (!name.empty() && name[0] == '^') {
    negated = !negated;
    name.erase(0, 1);
  }
  const auto ranges = unicode::category_ranges(name);
  if (!ranges || caseless || spelling == CategorySpelling::kPcre2Tables)
    return std::string(original);
  const auto delta = unicode::delta_since_baseline(name);
  const bool additions_exact =
      spelling == CategorySpelling::kBaselinePlusAdditions && delta && !delta->any_removed;
  if (additions_exact && !(negated && in_class)) {
    std::string property = negated ? "\\P{" : "\\p{";
    property.append(name).append("}");
    if (!in_class) return with_additions(property, delta->added, negated);
    class_additions.insert(class_additions.end(), delta->added.begin(), delta->added.end());
    return property;
  }
  const std::string contents = class_contents(negated ? unicode::complement(*ranges) : *ranges);
  if (contents.empty()) return std::string(original);  // only surrogates (Cs): PCRE2's own
  return in_class ? contents : std::string("[").append(contents).append("]");
}

// Case-insensitivity by group: "(?i)" sets it for the rest of the group, "(?i:" opens a group
// with it, "(?-i" clears it, any other "(" opens a group keeping it.
class CaselessScopes {
 public:
  bool caseless() const { return stack_.back(); }
  // At '(' (pattern[i]); does not consume anything.
  void open(std::string_view pattern, size_t i) {
    bool state = stack_.back();
    size_t j = i + 1;
    if (j < pattern.size() && pattern[j] == '?') {
      bool on = true, flags_only = true;
      bool next_state = state;
      for (++j; j < pattern.size() && pattern[j] != ':' && pattern[j] != ')'; ++j) {
        const char f = pattern[j];
        if (f == '-')
          on = false;
        else if (f == 'i')
          next_state = on;
        else if (!((f >= 'a' && f <= 'z') || (f >= 'A' && f <= 'Z') || f == '^'))
          flags_only = false;
      }
      if (flags_only && j < pattern.size() && pattern[j] == ')') {  // (?i): rest of this group
        stack_.back() = next_state;
        stack_.push_back(next_state);  // balanced by this group's own ')'
        return;
      }
      if (flags_only && j < pattern.size()) state = next_state;  // (?i:...)
    }
    stack_.push_back(state);
  }
  void close() {
    if (stack_.size() > 1) stack_.pop_back();
  }

 private:
  std::vector<bool> stack_{false};
};

}  // namespace

CategorySpelling category_spelling_for_linked_pcre2() {
  char version[64] = {};
  if (pcre2_config(PCRE2_CONFIG_UNICODE_VERSION, version) < 0)
    return CategorySpelling::kExplicitRanges;
  for (std::string_view known : kKnownTableVersions)
    if (known == version) return CategorySpelling::kBaselinePlusAdditions;
  return CategorySpelling::kExplicitRanges;
}

std::string hf_digits_pattern(bool individual_digits) {
  const std::vector<unicode::CodePointRange> added(
      unicode::kDigitsAdditions, unicode::kDigitsAdditions + unicode::kDigitsAdditionsCount);
  return "[\\p{N}" + class_contents(added) + (individual_digits ? "]" : "]+");
}

std::string pcre2_pattern_of(std::string_view hf_pattern) {
  static const CategorySpelling spelling = category_spelling_for_linked_pcre2();
  return pcre2_pattern_of(hf_pattern, spelling);
}

std::string pcre2_pattern_of(std::string_view hf_pattern, CategorySpelling spelling) {
  std::string out;
  bool in_class = false;
  size_t class_begin = 0;  // where the open class starts in `out`
  bool class_negated = false;
  std::vector<unicode::CodePointRange> class_additions;
  CaselessScopes scopes;
  for (size_t i = 0; i < hf_pattern.size(); ++i) {
    const char c = hf_pattern[i];
    if (c == '\\' && i + 1 < hf_pattern.size()) {
      const size_t escape_begin = i;
      const char e = hf_pattern[++i];
      if (e == 's') {
        out += in_class ? std::string(kWhiteSpace) : "[" + std::string(kWhiteSpace) + "]";
      } else if (e == 'S') {
        if (in_class)
          throw patchbay::PluginError(PB_STATUS_INVALID_ARGUMENT,
                                      "pre-tokenizer pattern '" + std::string(hf_pattern) +
                                          "': \\S inside a character class is not supported");
        out += "[^" + std::string(kWhiteSpace) + "]";
      } else if ((e == 'p' || e == 'P') && i + 1 < hf_pattern.size() && hf_pattern[i + 1] == '{' &&
                 hf_pattern.find('}', i + 2) != std::string_view::npos) {
        const size_t close = hf_pattern.find('}', i + 2);
        const std::string name(hf_pattern.substr(i + 2, close - i - 2));
        out += category_escape(hf_pattern.substr(escape_begin, close + 1 - escape_begin), name,
                               e == 'P', in_class, scopes.caseless(), spelling, class_additions);
        i = close;
      } else {
        out += c;
        out += e;
      }
      continue;
    }
    if (c == '[' && !in_class) {
      in_class = true;
      class_begin = out.size();
      class_negated = i + 1 < hf_pattern.size() && hf_pattern[i + 1] == '^';
      class_additions.clear();
      out += c;
      if (class_negated) out += hf_pattern[++i];
      if (i + 1 < hf_pattern.size() && hf_pattern[i + 1] == ']') out += hf_pattern[++i];  // literal
      continue;
    }
    if (c == ']' && in_class) {
      in_class = false;
      const std::string atom = out.substr(class_begin) + "]";
      out.resize(class_begin);
      out += with_additions(atom, class_additions, class_negated);
      continue;
    }
    if (!in_class && c == '(') scopes.open(hf_pattern, i);
    if (!in_class && c == ')') scopes.close();
    out += c;
  }
  return out;
}

}  // namespace patchbay_bpe
