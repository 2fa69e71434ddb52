// GPT-2 pre-tokeniser on PCRE2 (UTF + UCP + JIT + MATCH_INVALID_UTF); see the header.
#define PCRE2_CODE_UNIT_WIDTH 8
#include "bpe_pretokenizer.hpp"

#include <pcre2.h>

#include <array>
#include <new>

#include "patchbay/component.hpp"

namespace patchbay_bpe {
namespace {

bool is_ascii_alnum(unsigned char c) {
  return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z');
}

}  // namespace

// GPT-2's pattern in PCRE2 syntax: \s as Unicode's White_Space set (what Python's `regex` and
// Oniguruma match; PCRE2's own \s also matches U+180E, which split "\n\n\x{180E}" and
// "\x{180E}'s" differently from both references, found by scripts/tokenizers/
// compare_tokenizers.py) and \p{L}, \p{N} by Unicode 16.0 as `tokenizers` classifies (see
// unicode_pattern.hpp).
Gpt2PreTokenizer::Gpt2PreTokenizer(std::optional<CategorySpelling> spelling)
    : pattern_(spelling ? pcre2_pattern_of(kGpt2HfPattern, *spelling)
                        : pcre2_pattern_of(kGpt2HfPattern)) {
  int error_code = 0;
  PCRE2_SIZE error_offset = 0;
  pcre2_code* code = pcre2_compile(reinterpret_cast<PCRE2_SPTR>(pattern_.c_str()), pattern_.size(),
                                   PCRE2_UTF | PCRE2_UCP | PCRE2_MATCH_INVALID_UTF, &error_code,
                                   &error_offset, nullptr);
  if (code == nullptr) {
    PCRE2_UCHAR message[256];
    pcre2_get_error_message(error_code, message, sizeof(message));
    throw patchbay::PluginError(PB_STATUS_INTERNAL,
                                std::string("GPT-2 pattern refused by PCRE2 at offset ") +
                                    std::to_string(error_offset) + ": " +
                                    reinterpret_cast<const char*>(message));
  }
  // JIT is an optimisation; without it (e.g. a PCRE2 built without JIT) the interpreter
  // gives the same matches.
  jit_ = pcre2_jit_compile(code, PCRE2_JIT_COMPLETE) == 0;
  code_ = code;
}

Gpt2PreTokenizer::~Gpt2PreTokenizer() { pcre2_code_free(static_cast<pcre2_code*>(code_)); }

namespace {

// ASCII classes as PCRE2 sees them under UCP: \s is \t \n \v \f \r and space (not
// \x1c-\x1f); letters and digits are [A-Za-z] and [0-9]; every other ASCII byte is "other"
// ([^\s\p{L}\p{N}]). Bytes >= 0x80 are kNonAscii: the fast path never decides on them.
enum AsciiClass : unsigned char { kLetter, kDigit, kSpace, kOther, kNonAscii };

constexpr std::array<AsciiClass, 256> make_class_table() {
  std::array<AsciiClass, 256> table{};
  for (int c = 0; c < 256; ++c) {
    AsciiClass k = kOther;
    if (c >= 0x80)
      k = kNonAscii;
    else if ((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z'))
      k = kLetter;
    else if (c >= '0' && c <= '9')
      k = kDigit;
    else if (c == ' ' || c == '\t' || c == '\n' || c == '\v' || c == '\f' || c == '\r')
      k = kSpace;
    table[static_cast<size_t>(c)] = k;
  }
  return table;
}
constexpr std::array<AsciiClass, 256> kClass = make_class_table();

inline AsciiClass class_at(std::string_view text, size_t i) {
  return i < text.size() ? kClass[static_cast<unsigned char>(text[i])]
                         : kSpace;  // past end: unused
}

// End of the run of class `k` starting at i, and whether it stopped at a non-ASCII byte
// (then a Unicode letter/digit/space/other could continue it: undecidable here).
inline size_t run_end(std::string_view text, size_t i, AsciiClass k, bool& hit_non_ascii) {
  while (i < text.size() && kClass[static_cast<unsigned char>(text[i])] == k) ++i;
  hit_non_ascii = i < text.size() && kClass[static_cast<unsigned char>(text[i])] == kNonAscii;
  return i;
}

// Length of the piece starting at i (0 when the fast path cannot decide). Mirrors the
// alternatives in order: contractions, ' ?\p{L}+', ' ?\p{N}+', ' ?[^\s\p{L}\p{N}]+',
// '\s+(?!\S)', '\s+'.
size_t ascii_piece_length(std::string_view text, size_t i) {
  const size_t n = text.size();
  const char c = text[i];
  if (c == '\'' && i + 1 < n) {
    const char a = text[i + 1];
    if (a == 's' || a == 't' || a == 'm' || a == 'd') return 2;
    if (i + 2 < n) {
      const char b = text[i + 2];
      if ((a == 'r' && b == 'e') || (a == 'v' && b == 'e') || (a == 'l' && b == 'l')) return 3;
    }
  }
  const AsciiClass here = kClass[static_cast<unsigned char>(c)];
  if (here == kNonAscii) return 0;
  // Optional leading space for the three ' ?X+' alternatives.
  size_t start = i;
  AsciiClass body = here;
  if (c == ' ' && i + 1 < n) {
    const AsciiClass next = class_at(text, i + 1);
    if (next == kNonAscii) return 0;  // ' ' + a Unicode letter/digit/other: PCRE2 decides
    if (next == kLetter || next == kDigit || next == kOther) {
      start = i + 1;
      body = next;
    }
  }
  bool hit_non_ascii = false;
  if (body == kLetter || body == kDigit || body == kOther) {
    const size_t end = run_end(text, start, body, hit_non_ascii);
    return hit_non_ascii ? 0 : end - i;
  }
  // Whitespace run [i, end).
  const size_t end = run_end(text, i, kSpace, hit_non_ascii);
  if (hit_non_ascii) return 0;           // NBSP or a Unicode space might extend it
  if (end == n) return end - i;          // \s+(?!\S) takes the whole run at the end
  if (end - i >= 2) return end - i - 1;  // stops one short of the non-space
  return 1;                              // \s+ alone
}

}  // namespace

void Gpt2PreTokenizer::split(std::string_view text,
                             const std::function<void(std::string_view)>& on_piece) const {
  auto* code = static_cast<pcre2_code*>(code_);
  pcre2_match_data* match = nullptr;
  const auto* subject = reinterpret_cast<PCRE2_SPTR>(text.data());
  const size_t n = text.size();
  size_t pos = 0;
  try {
    while (pos < n) {
      const size_t length = ascii_piece_length(text, pos);
      if (length > 0) {
        on_piece(text.substr(pos, length));
        pos += length;
        continue;
      }
      if (match == nullptr) {
        match = pcre2_match_data_create_from_pattern(code, nullptr);
        if (match == nullptr) throw std::bad_alloc();
      }
      pos = next_pcre2_piece(subject, n, pos, match, text, on_piece);
    }
  } catch (...) {
    pcre2_match_data_free(match);
    throw;
  }
  pcre2_match_data_free(match);
}

size_t Gpt2PreTokenizer::next_pcre2_piece(
    const unsigned char* subject, size_t n, size_t pos, void* match_data, std::string_view text,
    const std::function<void(std::string_view)>& on_piece) const {
  auto* code = static_cast<pcre2_code*>(code_);
  auto* match = static_cast<pcre2_match_data*>(match_data);
  const int rc = jit_ ? pcre2_jit_match(code, subject, n, pos, 0, match, nullptr)
                      : pcre2_match(code, subject, n, pos, 0, match, nullptr);
  size_t match_begin = n;
  size_t match_end = n;
  if (rc >= 1) {
    const PCRE2_SIZE* ovector = pcre2_get_ovector_pointer(match);
    match_begin = ovector[0];
    match_end = ovector[1];
  } else if (rc != PCRE2_ERROR_NOMATCH) {
    throw patchbay::PluginError(PB_STATUS_INTERNAL,
                                "PCRE2 match failed with code " + std::to_string(rc));
  }
  // Bytes the pattern skipped belong to invalid UTF-8 sequences: one piece per byte.
  for (; pos < match_begin; ++pos) on_piece(text.substr(pos, 1));
  if (match_end > match_begin) on_piece(text.substr(match_begin, match_end - match_begin));
  // The pattern has no empty alternative, so a match always advances.
  return match_end > pos ? match_end : pos + 1;
}

void Gpt2PreTokenizer::split_with_pcre2(
    std::string_view text, const std::function<void(std::string_view)>& on_piece) const {
  auto* code = static_cast<pcre2_code*>(code_);
  pcre2_match_data* match = pcre2_match_data_create_from_pattern(code, nullptr);
  if (match == nullptr) throw std::bad_alloc();
  const auto* subject = reinterpret_cast<PCRE2_SPTR>(text.data());
  size_t pos = 0;
  try {
    while (pos < text.size())
      pos = next_pcre2_piece(subject, text.size(), pos, match, text, on_piece);
  } catch (...) {
    pcre2_match_data_free(match);
    throw;
  }
  pcre2_match_data_free(match);
}

std::vector<std::string> Gpt2PreTokenizer::split_to_vector(std::string_view text) const {
  std::vector<std::string> pieces;
  split(text, [&](std::string_view piece) { pieces.emplace_back(piece); });
  return pieces;
}

bool Gpt2PreTokenizer::is_safe_cut(std::string_view text, size_t p) {
  return p + 1 < text.size() && text[p] == ' ' &&
         is_ascii_alnum(static_cast<unsigned char>(text[p + 1]));
}

size_t Gpt2PreTokenizer::next_safe_cut(std::string_view text, size_t from) {
  for (size_t p = from; p + 1 < text.size(); ++p) {
    if (is_safe_cut(text, p)) return p;
  }
  return text.size();
}

}  // namespace patchbay_bpe
