// GPT-2 pre-tokeniser on PCRE2 (UTF + UCP + JIT + MATCH_INVALID_UTF); see the header.
#define PCRE2_CODE_UNIT_WIDTH 8
#include "bpe_pretokenizer.hpp"

#include <pcre2.h>

#include <stdexcept>

namespace patchbay_bpe {
namespace {

constexpr const char* kGpt2Pattern =
    R"('s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+)";

bool is_ascii_alnum(unsigned char c) {
  return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z');
}

}  // namespace

const char* Gpt2PreTokenizer::pattern() { return kGpt2Pattern; }

Gpt2PreTokenizer::Gpt2PreTokenizer() {
  int error_code = 0;
  PCRE2_SIZE error_offset = 0;
  pcre2_code* code = pcre2_compile(reinterpret_cast<PCRE2_SPTR>(kGpt2Pattern), PCRE2_ZERO_TERMINATED,
                                   PCRE2_UTF | PCRE2_UCP | PCRE2_MATCH_INVALID_UTF, &error_code,
                                   &error_offset, nullptr);
  if (code == nullptr) {
    PCRE2_UCHAR message[256];
    pcre2_get_error_message(error_code, message, sizeof(message));
    throw std::runtime_error(std::string("GPT-2 pattern refused by PCRE2 at offset ") +
                             std::to_string(error_offset) + ": " +
                             reinterpret_cast<const char*>(message));
  }
  // JIT is an optimisation; without it (e.g. a PCRE2 built without JIT) the interpreter
  // gives the same matches.
  jit_ = pcre2_jit_compile(code, PCRE2_JIT_COMPLETE) == 0;
  code_ = code;
}

Gpt2PreTokenizer::~Gpt2PreTokenizer() { pcre2_code_free(static_cast<pcre2_code*>(code_)); }

void Gpt2PreTokenizer::split(std::string_view text,
                             const std::function<void(std::string_view)>& on_piece) const {
  auto* code = static_cast<pcre2_code*>(code_);
  pcre2_match_data* match = pcre2_match_data_create_from_pattern(code, nullptr);
  if (match == nullptr) throw std::bad_alloc();
  const auto* subject = reinterpret_cast<PCRE2_SPTR>(text.data());
  const size_t n = text.size();
  size_t pos = 0;
  while (pos < n) {
    const int rc = jit_ ? pcre2_jit_match(code, subject, n, pos, 0, match, nullptr)
                        : pcre2_match(code, subject, n, pos, 0, match, nullptr);
    size_t match_begin = n;
    size_t match_end = n;
    if (rc >= 1) {
      const PCRE2_SIZE* ovector = pcre2_get_ovector_pointer(match);
      match_begin = ovector[0];
      match_end = ovector[1];
    } else if (rc != PCRE2_ERROR_NOMATCH) {
      pcre2_match_data_free(match);
      throw std::runtime_error("PCRE2 match failed with code " + std::to_string(rc));
    }
    // Bytes the pattern skipped belong to invalid UTF-8 sequences: one piece per byte.
    for (; pos < match_begin; ++pos) on_piece(text.substr(pos, 1));
    if (match_end > match_begin) on_piece(text.substr(match_begin, match_end - match_begin));
    // The pattern has no empty alternative, so a match always advances.
    pos = match_end > pos ? match_end : pos + 1;
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
