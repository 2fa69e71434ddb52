// Corpus BLEU and chrF as sacreBLEU (2.x) defines them, one reference per hypothesis:
//
// BLEU  = BP · exp(mean over n = 1..4 of log p_n), in percent, with
//   tokens: sacreBLEU's "13a" tokenizer (mteval-v13a: punctuation split off, periods and
//           commas kept inside numbers, "-" split after a digit; apostrophes and hyphens
//           between letters stay), on each line with trailing whitespace removed;
//   p_n   = 100 · Σ clipped matching n-grams / Σ hypothesis n-grams, over the whole corpus;
//   smoothing "exp" (sacreBLEU's default): the k-th order with no match counts
//           100 / (2^k · total_n); an order with no hypothesis n-gram at all gives 0;
//   BP    = exp(1 − ref_len / sys_len) when sys_len < ref_len, else 1 (0 when sys_len = 0);
//   no match at any order: BLEU = 0.
// chrF  = F_β of character n-gram precision and recall, n = 1..6, β = 2, no word n-grams,
//   whitespace removed before counting (characters are Unicode code points of UTF-8 text):
//   statistics (hyp n-grams, ref n-grams, matches) summed over the corpus per order (a
//   segment's hypothesis n-grams of an order count only when its reference has some), then
//   precision and recall averaged over the orders where both sides have n-grams, and
//   chrF = 100 · (1 + β²) P R / (β² P + R).
// Whitespace is Python's str.split() whitespace (ASCII and the Unicode spaces).
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace patchbay::eval {

// sacreBLEU's Tokenizer13a: tokens joined by single spaces.
std::string tokenize_13a(std::string_view line);

struct BleuScore {
  double score = 0;                  // 0..100
  std::array<int64_t, 4> correct{};  // clipped matching n-grams, n = 1..4
  std::array<int64_t, 4> total{};    // hypothesis n-grams
  std::array<double, 4> precisions{};
  double brevity_penalty = 0;
  int64_t sys_len = 0, ref_len = 0;  // tokens
};

// Throws Error(kInvalidArgument) when the lists differ in length.
BleuScore corpus_bleu(const std::vector<std::string>& hypotheses,
                      const std::vector<std::string>& references);

struct ChrfScore {
  double score = 0;  // 0..100
  // Per order n = 1..6: hypothesis n-grams, reference n-grams, matches (summed over the corpus).
  std::array<std::array<int64_t, 3>, 6> statistics{};
};

// Throws Error(kInvalidArgument) when the lists differ in length.
ChrfScore corpus_chrf(const std::vector<std::string>& hypotheses,
                      const std::vector<std::string>& references);

// "BLEU = 12.34 45.6/20.1/9.8/4.9 (BP = 0.950 ratio = 0.951 hyp_len = 100 ref_len = 105)", as
// sacreBLEU prints a score (format() without signature), and "chrF2 = 41.23".
std::string format_bleu(const BleuScore& bleu);
std::string format_chrf(const ChrfScore& chrf);

}  // namespace patchbay::eval
