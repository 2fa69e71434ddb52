// Corpus BLEU (13a tokens, exp smoothing) and chrF (char order 6, beta 2) as sacreBLEU
// computes them (mt_metrics.hpp). The 13a regular expressions are applied as Python's re.sub
// applies them: left to right, non-overlapping; they test ASCII classes only, so working on
// UTF-8 bytes gives the same result as on code points.
#include "eval/mt_metrics.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <map>
#include <unordered_map>

#include "common/error.hpp"

namespace patchbay::eval {
namespace {

void check_lengths(const char* metric, size_t hypotheses, size_t references) {
  if (hypotheses != references)
    throw Error(ErrorKind::kInvalidArgument,
                std::string(metric) + ": " + std::to_string(hypotheses) + " hypotheses but " +
                    std::to_string(references) + " references; give one reference per hypothesis");
}

// UTF-8 text -> code points (a malformed byte stands for itself, as U+DC80 + byte would).
std::vector<char32_t> code_points(std::string_view text) {
  std::vector<char32_t> out;
  out.reserve(text.size());
  for (size_t i = 0; i < text.size();) {
    const auto b = static_cast<unsigned char>(text[i]);
    const size_t n = b < 0x80           ? 1
                     : (b >> 5) == 0x6  ? 2
                     : (b >> 4) == 0xE  ? 3
                     : (b >> 3) == 0x1E ? 4
                                        : 0;
    if (n == 0 || i + n > text.size()) {
      out.push_back(0xDC00 + b);
      ++i;
      continue;
    }
    char32_t cp = n == 1 ? b : b & (0xFF >> (n + 1));
    for (size_t k = 1; k < n; ++k)
      cp = (cp << 6) | (static_cast<unsigned char>(text[i + k]) & 0x3F);
    out.push_back(cp);
    i += n;
  }
  return out;
}

// Python's str.isspace() code points (what str.split() splits on).
bool is_python_space(char32_t c) {
  return (c >= 0x09 && c <= 0x0D) || (c >= 0x1C && c <= 0x20) || c == 0x85 || c == 0xA0 ||
         c == 0x1680 || (c >= 0x2000 && c <= 0x200A) || c == 0x2028 || c == 0x2029 || c == 0x202F ||
         c == 0x205F || c == 0x3000;
}

// Byte length of the Python whitespace code point at text[i], or 0.
size_t space_at(std::string_view text, size_t i) {
  const auto b = static_cast<unsigned char>(text[i]);
  if (b < 0x80) return is_python_space(b) ? 1 : 0;
  size_t n = (b >> 5) == 0x6 ? 2 : (b >> 4) == 0xE ? 3 : 0;
  if (n == 0 || i + n > text.size()) return 0;
  const std::vector<char32_t> cp = code_points(text.substr(i, n));
  return cp.size() == 1 && is_python_space(cp[0]) ? n : 0;
}

// ' '.join(text.split()).
std::string join_words(std::string_view text) {
  std::string out;
  bool pending_space = false;
  for (size_t i = 0; i < text.size();) {
    if (const size_t n = space_at(text, i); n > 0) {
      pending_space = !out.empty();
      i += n;
      continue;
    }
    if (pending_space) out += ' ';
    pending_space = false;
    out += text[i++];
  }
  return out;
}

std::vector<std::string> split_words(std::string_view text) {
  std::vector<std::string> words;
  const std::string joined = join_words(text);
  size_t start = 0;
  while (start < joined.size()) {
    size_t end = joined.find(' ', start);
    if (end == std::string::npos) end = joined.size();
    words.push_back(joined.substr(start, end - start));
    start = end + 1;
  }
  return words;
}

std::string_view rstrip(std::string_view s) {
  while (!s.empty()) {
    size_t back = 1;  // the last code point's byte length
    while (back < s.size() && back < 4 &&
           (static_cast<unsigned char>(s[s.size() - back]) & 0xC0) == 0x80)
      ++back;
    if (space_at(s, s.size() - back) != back) break;
    s.remove_suffix(back);
  }
  return s;
}

void replace_all(std::string& s, std::string_view from, std::string_view to) {
  for (size_t at = s.find(from); at != std::string::npos; at = s.find(from, at + to.size()))
    s.replace(at, from.size(), to);
}

bool is_digit(char c) { return c >= '0' && c <= '9'; }

// [\{-\~\[-\` -\&\(-\+\:-\@\/]: { | } ~ [ \ ] ^ _ ` space ! " # $ % & ( ) * + : ; < = > ? @ /
bool is_13a_symbol(char c) {
  return (c >= '{' && c <= '~') || (c >= '[' && c <= '`') || (c >= ' ' && c <= '&') ||
         (c >= '(' && c <= '+') || (c >= ':' && c <= '@') || c == '/';
}

// re.sub over two-character patterns: match(a, b) at each position, left to right; a match
// writes emit(a, b) and moves past both characters.
template <typename Match, typename Emit>
std::string substitute_pairs(const std::string& s, Match match, Emit emit) {
  std::string out;
  out.reserve(s.size() + s.size() / 4);
  size_t i = 0;
  while (i < s.size()) {
    if (i + 1 < s.size() && match(s[i], s[i + 1])) {
      emit(out, s[i], s[i + 1]);
      i += 2;
    } else {
      out += s[i++];
    }
  }
  return out;
}

using NgramCounts = std::unordered_map<std::string, int64_t>;

// Word n-grams of order n (joined by a separator no token contains).
NgramCounts word_ngrams(const std::vector<std::string>& words, size_t n) {
  NgramCounts counts;
  for (size_t i = 0; i + n <= words.size(); ++i) {
    std::string key = words[i];
    for (size_t k = 1; k < n; ++k) key += '\x01' + words[i + k];
    ++counts[key];
  }
  return counts;
}

// Character n-grams of order n over code points (as u32 strings).
std::map<std::u32string, int64_t> char_ngrams(const std::u32string& chars, size_t n) {
  std::map<std::u32string, int64_t> counts;
  for (size_t i = 0; i + n <= chars.size(); ++i) ++counts[chars.substr(i, n)];
  return counts;
}

// The text's code points with whitespace removed (''.join(line.split())).
std::u32string chrf_characters(std::string_view text) {
  std::u32string out;
  for (const char32_t c : code_points(rstrip(text)))
    if (!is_python_space(c)) out += c;
  return out;
}

}  // namespace

std::string tokenize_13a(std::string_view text) {
  std::string line(text);
  replace_all(line, "<skipped>", "");
  replace_all(line, "-\n", "");
  replace_all(line, "\n", " ");
  if (line.find('&') != std::string::npos) {
    replace_all(line, "&quot;", "\"");
    replace_all(line, "&amp;", "&");
    replace_all(line, "&lt;", "<");
    replace_all(line, "&gt;", ">");
  }
  line = " " + line + " ";
  // ([\{-\~\[-\` -\&\(-\+\:-\@\/]) -> " \1 "
  std::string symbols;
  symbols.reserve(line.size() * 2);
  for (const char c : line) {
    if (is_13a_symbol(c)) {
      symbols += ' ';
      symbols += c;
      symbols += ' ';
    } else {
      symbols += c;
    }
  }
  // ([^0-9])([\.,]) -> "\1 \2 "
  std::string s = substitute_pairs(
      symbols, [](char a, char b) { return !is_digit(a) && (b == '.' || b == ','); },
      [](std::string& o, char a, char b) { o += a, o += ' ', o += b, o += ' '; });
  // ([\.,])([^0-9]) -> " \1 \2"
  s = substitute_pairs(
      s, [](char a, char b) { return (a == '.' || a == ',') && !is_digit(b); },
      [](std::string& o, char a, char b) { o += ' ', o += a, o += ' ', o += b; });
  // ([0-9])(-) -> "\1 \2 "
  s = substitute_pairs(
      s, [](char a, char b) { return is_digit(a) && b == '-'; },
      [](std::string& o, char a, char b) { o += a, o += ' ', o += b, o += ' '; });
  return join_words(s);
}

BleuScore corpus_bleu(const std::vector<std::string>& hypotheses,
                      const std::vector<std::string>& references) {
  check_lengths("BLEU", hypotheses.size(), references.size());
  BleuScore r;
  for (size_t i = 0; i < hypotheses.size(); ++i) {
    const std::vector<std::string> hyp = split_words(tokenize_13a(rstrip(hypotheses[i])));
    const std::vector<std::string> ref = split_words(tokenize_13a(rstrip(references[i])));
    r.sys_len += static_cast<int64_t>(hyp.size());
    r.ref_len += static_cast<int64_t>(ref.size());
    for (size_t n = 1; n <= 4; ++n) {
      const NgramCounts h = word_ngrams(hyp, n), g = word_ngrams(ref, n);
      for (const auto& [key, count] : h) {
        r.total[n - 1] += count;
        if (const auto it = g.find(key); it != g.end())
          r.correct[n - 1] += std::min(count, it->second);
      }
    }
  }
  r.brevity_penalty =
      r.sys_len >= r.ref_len ? 1.0
      : r.sys_len > 0
          ? std::exp(1.0 - static_cast<double>(r.ref_len) / static_cast<double>(r.sys_len))
          : 0.0;
  if (std::all_of(r.correct.begin(), r.correct.end(), [](int64_t c) { return c == 0; })) return r;
  double smooth = 1.0, log_sum = 0.0;
  for (size_t n = 0; n < 4; ++n) {
    if (r.total[n] == 0) break;  // precisions of this and higher orders stay 0
    if (r.correct[n] == 0) {
      smooth *= 2;
      r.precisions[n] = 100.0 / (smooth * static_cast<double>(r.total[n]));
    } else {
      r.precisions[n] = 100.0 * static_cast<double>(r.correct[n]) / static_cast<double>(r.total[n]);
    }
  }
  for (const double p : r.precisions) log_sum += p == 0.0 ? -9999999999.0 : std::log(p);
  r.score = r.brevity_penalty * std::exp(log_sum / 4.0);
  return r;
}

ChrfScore corpus_chrf(const std::vector<std::string>& hypotheses,
                      const std::vector<std::string>& references) {
  check_lengths("chrF", hypotheses.size(), references.size());
  ChrfScore r;
  for (size_t i = 0; i < hypotheses.size(); ++i) {
    const std::u32string hyp = chrf_characters(hypotheses[i]);
    const std::u32string ref = chrf_characters(references[i]);
    for (size_t n = 1; n <= 6; ++n) {
      const auto h = char_ngrams(hyp, n), g = char_ngrams(ref, n);
      std::array<int64_t, 3>& s = r.statistics[n - 1];
      // sacreBLEU counts a segment's hypothesis n-grams of an order only when its reference
      // has n-grams of that order ("don't count hits if no reference exists").
      for (const auto& [key, count] : h) {
        if (!g.empty()) s[0] += count;
        if (const auto it = g.find(key); it != g.end()) s[2] += std::min(count, it->second);
      }
      for (const auto& entry : g) s[1] += entry.second;
    }
  }
  constexpr double kBeta2 = 4.0;  // beta = 2
  double precision = 0, recall = 0;
  int effective = 0;
  for (const std::array<int64_t, 3>& s : r.statistics) {
    if (s[0] == 0 || s[1] == 0) continue;  // an order without n-grams on one side is left out
    precision += static_cast<double>(s[2]) / static_cast<double>(s[0]);
    recall += static_cast<double>(s[2]) / static_cast<double>(s[1]);
    ++effective;
  }
  if (effective == 0) return r;
  precision /= effective;
  recall /= effective;
  if (precision + recall > 0)
    r.score = 100.0 * (1 + kBeta2) * precision * recall / (kBeta2 * precision + recall);
  return r;
}

std::string format_bleu(const BleuScore& b) {
  char text[256];
  const double ratio =
      b.ref_len > 0 ? static_cast<double>(b.sys_len) / static_cast<double>(b.ref_len) : 0.0;
  std::snprintf(
      text, sizeof text,
      "BLEU = %.2f %.1f/%.1f/%.1f/%.1f (BP = %.3f ratio = %.3f hyp_len = %lld ref_len = %lld)",
      b.score, b.precisions[0], b.precisions[1], b.precisions[2], b.precisions[3],
      b.brevity_penalty, ratio, static_cast<long long>(b.sys_len),
      static_cast<long long>(b.ref_len));
  return text;
}

std::string format_chrf(const ChrfScore& c) {
  char text[64];
  std::snprintf(text, sizeof text, "chrF2 = %.2f", c.score);
  return text;
}

}  // namespace patchbay::eval
