// Sequences of regex splits (Split/Digits/ByteLevel pre-tokenizers); see the header.
#define PCRE2_CODE_UNIT_WIDTH 8
#include "pattern_pretokenizer.hpp"

#include <pcre2.h>

#include <new>

#include "patchbay/component.hpp"

namespace patchbay_bpe {
namespace {

bool is_gpt2_pattern(const std::string& pattern) {
  const std::string full = kGpt2HfPattern;
  return pattern == full || pattern == full.substr(0, full.size() - 4);  // without "|\s+"
}

}  // namespace

PatternPreTokenizer::PatternPreTokenizer(std::vector<std::string> hf_patterns,
                                         std::optional<CategorySpelling> spelling)
    : patterns_(std::move(hf_patterns)) {
  if (patterns_.empty())
    throw patchbay::PluginError(PB_STATUS_INVALID_ARGUMENT,
                                "a pattern pre-tokenizer needs a pattern");
  for (const std::string& pattern : patterns_) {
    Step step;
    if (is_gpt2_pattern(pattern)) {
      if (!gpt2_) gpt2_ = std::make_unique<Gpt2PreTokenizer>(spelling);
      steps_.push_back(step);
      continue;
    }
    const std::string translated =
        spelling ? pcre2_pattern_of(pattern, *spelling) : pcre2_pattern_of(pattern);
    int error_code = 0;
    PCRE2_SIZE error_offset = 0;
    pcre2_code* code = pcre2_compile(
        reinterpret_cast<PCRE2_SPTR>(translated.c_str()), translated.size(),
        PCRE2_UTF | PCRE2_UCP | PCRE2_MATCH_INVALID_UTF, &error_code, &error_offset, nullptr);
    if (code == nullptr) {
      PCRE2_UCHAR message[256];
      pcre2_get_error_message(error_code, message, sizeof(message));
      for (Step& s : steps_) pcre2_code_free(static_cast<pcre2_code*>(s.code));
      throw patchbay::PluginError(PB_STATUS_INVALID_ARGUMENT,
                                  "pre-tokenizer pattern '" + pattern + "' is refused by PCRE2 (" +
                                      reinterpret_cast<const char*>(message) + ", offset " +
                                      std::to_string(error_offset) + " of '" + translated + "')");
    }
    step.jit = pcre2_jit_compile(code, PCRE2_JIT_COMPLETE) == 0;
    step.code = code;
    steps_.push_back(step);
  }
}

PatternPreTokenizer::~PatternPreTokenizer() {
  for (Step& s : steps_) pcre2_code_free(static_cast<pcre2_code*>(s.code));
}

void PatternPreTokenizer::split(std::string_view text,
                                const std::function<void(std::string_view)>& on_piece) const {
  if (!text.empty()) split_step(0, text, on_piece);
}

void PatternPreTokenizer::split_step(size_t index, std::string_view text,
                                     const std::function<void(std::string_view)>& on_piece) const {
  const bool last = index + 1 == steps_.size();
  const std::function<void(std::string_view)> next =
      last ? on_piece : [&](std::string_view piece) { split_step(index + 1, piece, on_piece); };
  const Step& step = steps_[index];
  if (step.code == nullptr) {
    gpt2_->split(text, next);
    return;
  }
  auto* code = static_cast<pcre2_code*>(step.code);
  pcre2_match_data* match = pcre2_match_data_create_from_pattern(code, nullptr);
  if (match == nullptr) throw std::bad_alloc();
  const auto* subject = reinterpret_cast<PCRE2_SPTR>(text.data());
  const size_t n = text.size();
  size_t pos = 0, search = 0;  // pos: start of the pending gap; search: where to look next
  try {
    while (search < n) {
      const int rc = step.jit ? pcre2_jit_match(code, subject, n, search, 0, match, nullptr)
                              : pcre2_match(code, subject, n, search, 0, match, nullptr);
      if (rc == PCRE2_ERROR_NOMATCH) break;
      if (rc < 1)
        throw patchbay::PluginError(PB_STATUS_INTERNAL,
                                    "PCRE2 match failed with code " + std::to_string(rc));
      const PCRE2_SIZE* ovector = pcre2_get_ovector_pointer(match);
      const size_t begin = ovector[0], end = ovector[1];
      if (end == begin) {  // an empty match splits nothing: look again one character on
        search = begin + 1;
        while (search < n && (static_cast<unsigned char>(text[search]) & 0xC0) == 0x80) ++search;
        continue;
      }
      if (begin > pos) next(text.substr(pos, begin - pos));  // the gap before the match
      next(text.substr(begin, end - begin));
      pos = search = end;
    }
  } catch (...) {
    pcre2_match_data_free(match);
    throw;
  }
  pcre2_match_data_free(match);
  if (pos < n) next(text.substr(pos));
}

std::vector<std::string> PatternPreTokenizer::split_to_vector(std::string_view text) const {
  std::vector<std::string> pieces;
  split(text, [&](std::string_view piece) { pieces.emplace_back(piece); });
  return pieces;
}

}  // namespace patchbay_bpe
