// Corpus BLEU and chrF (core/eval/mt_metrics.hpp) on small cases computed by hand from
// sacreBLEU's definitions (the values agree with sacrebleu 2.6.0's corpus_bleu / corpus_chrf;
// scripts/seq2seq/check_sacrebleu.py compares whole test sets).
#include "eval/mt_metrics.hpp"

#include <doctest/doctest.h>

#include <cmath>
#include <string>
#include <vector>

#include "common/error.hpp"

namespace ev = patchbay::eval;

TEST_CASE("13a tokenizer: punctuation, numbers, dashes, entities, whitespace") {
  CHECK(ev::tokenize_13a("Hello, world!") == "Hello , world !");
  // Apostrophes and hyphens between letters stay; "." and "," inside numbers stay.
  CHECK(ev::tokenize_13a("It's 3.5 km-long, costs $1,000.") ==
        "It's 3.5 km-long , costs $ 1,000 .");
  CHECK(ev::tokenize_13a("5-3 a&amp;b") == "5 - 3 a & b");
  // Non-ASCII quotes are not split; the comma before one is.
  CHECK(ev::tokenize_13a("\u201cHi,\u201d he said.") == "\u201cHi , \u201d he said .");
  CHECK(ev::tokenize_13a("x..y") == "x . . y");
  // Python's str.split() whitespace, no-break space included.
  CHECK(ev::tokenize_13a("a\u00a0b  c\t") == "a b c");
}

TEST_CASE("corpus BLEU: known answers") {
  const auto bleu = [](std::vector<std::string> h, std::vector<std::string> r) {
    return ev::corpus_bleu(h, r);
  };
  CHECK(bleu({"the cat sat on the mat"}, {"the cat sat on the mat"}).score ==
        doctest::Approx(100.0));

  // Precisions 5/5, 3/4, 2/3, 1/2; 5 tokens for 6: BP = exp(1 - 6/5).
  const ev::BleuScore short_hyp = bleu({"the cat sat on mat"}, {"the cat sat on the mat"});
  CHECK(short_hyp.correct == std::array<int64_t, 4>{5, 3, 2, 1});
  CHECK(short_hyp.total == std::array<int64_t, 4>{5, 4, 3, 2});
  CHECK(short_hyp.brevity_penalty == doctest::Approx(std::exp(-0.2)));
  CHECK(short_hyp.score ==
        doctest::Approx(100 * std::exp(-0.2) * std::pow(1.0 * 0.75 * (2.0 / 3) * 0.5, 0.25)));
  CHECK(short_hyp.score == doctest::Approx(57.893).epsilon(1e-4));

  // Exp smoothing: 3-grams 0/2 count 100 / (2 * 2), 4-grams 0/1 count 100 / (4 * 1).
  const ev::BleuScore smoothed = bleu({"a b c d"}, {"a b x d"});
  CHECK(smoothed.precisions[2] == doctest::Approx(25.0));
  CHECK(smoothed.precisions[3] == doctest::Approx(25.0));
  CHECK(smoothed.score == doctest::Approx(100 * std::pow(0.75 * (1.0 / 3) * 0.25 * 0.25, 0.25)));

  // Clipping ("the" counted once) and an order with no hypothesis n-gram: BLEU 0.
  const ev::BleuScore clipped = bleu({"the the the"}, {"the cat"});
  CHECK(clipped.correct[0] == 1);
  CHECK(clipped.precisions[0] == doctest::Approx(100.0 / 3));
  CHECK(clipped.precisions[1] == doctest::Approx(25.0));
  CHECK(clipped.total[3] == 0);
  CHECK(clipped.score == 0.0);
  CHECK(bleu({"x y"}, {"a b"}).score == 0.0);  // no match at all
  const ev::BleuScore empty = bleu({""}, {"a b"});
  CHECK(empty.score == 0.0);
  CHECK(empty.brevity_penalty == 0.0);

  // Corpus statistics add up before the score: correct 8,4,2,1 of 9,7,5,3; 9 tokens for 10.
  const ev::BleuScore corpus =
      bleu({"the cat sat on mat", "a b c d"}, {"the cat sat on the mat", "a b x d"});
  CHECK(corpus.score ==
        doctest::Approx(100 * std::exp(1 - 10.0 / 9) *
                        std::pow((8.0 / 9) * (4.0 / 7) * (2.0 / 5) * (1.0 / 3), 0.25)));
  CHECK(ev::format_bleu(corpus) ==
        "BLEU = 45.65 88.9/57.1/40.0/33.3 (BP = 0.895 ratio = 0.900 hyp_len = 9 ref_len = 10)");
  CHECK_THROWS_AS(bleu({"a"}, {"a", "b"}), patchbay::Error);
}

TEST_CASE("corpus chrF (char order 6, beta 2): known answers") {
  const auto chrf = [](std::vector<std::string> h, std::vector<std::string> r) {
    return ev::corpus_chrf(h, r).score;
  };
  CHECK(chrf({"ab"}, {"ab"}) == doctest::Approx(100.0));
  CHECK(chrf({"a b"}, {"ab"}) == doctest::Approx(100.0));  // whitespace removed
  // 1-grams 2/3 both ways, 2-grams 1/2, 3-grams 0/1: P = R = (2/3 + 1/2 + 0) / 3.
  CHECK(chrf({"abc"}, {"abd"}) == doctest::Approx(100 * (2.0 / 3 + 0.5) / 3));
  // Code points, not bytes: 1-grams P 1/2, R 1; the hypothesis' 2-gram has no reference
  // 2-gram and is left out: F2 = 5 P R / (4 P + R) = 2.5 / 3 (bytes would give 78.1).
  CHECK(chrf({"\u00e9\u00e9"}, {"\u00e9"}) == doctest::Approx(100 * 2.5 / 3));
  // Summed statistics: 1-grams 3 of 5 / 4, 2-grams 1 of 2 / 2, 3-grams 0 of 1 / 1.
  const double p = (0.6 + 0.5 + 0) / 3, r = (0.75 + 0.5 + 0) / 3;
  CHECK(chrf({"abc", "\u00e9\u00e9"}, {"abd", "\u00e9"}) ==
        doctest::Approx(100 * 5 * p * r / (4 * p + r)));
  CHECK(chrf({"x"}, {"y"}) == 0.0);
  CHECK(chrf({""}, {"ab"}) == 0.0);
  CHECK(ev::format_chrf(ev::corpus_chrf({"abc"}, {"abd"})) == "chrF2 = 38.89");
}
