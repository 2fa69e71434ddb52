// acc vs acc_norm on a case where they differ, the regex filter's findall semantics, and
// exact_match's options.
#include "eval/answer_metrics.hpp"

#include <doctest/doctest.h>

#include <cmath>

namespace ev = patchbay::eval;

TEST_CASE("acc and acc_norm pick different choices when lengths differ") {
  // ll = [-4, -6]: acc picks choice 0; per character (2 and 6 code points): -2 vs -1, so
  // acc_norm picks choice 1. "né" is 2 code points but 3 bytes: acc_bytes differs from acc_norm.
  const ev::ChoiceScores s = ev::choose({-4.0, -6.0}, {"ab", "abcdef"});
  CHECK(s.pred == 0);
  CHECK(s.pred_norm == 1);
  const ev::ChoiceScores u =
      ev::choose({-2.1, -3.2}, {"né", "abcd"});  // per char -1.05, -0.8; per byte -0.7, -0.8
  CHECK(u.pred_norm == 1);
  CHECK(u.pred_bytes == 0);
  CHECK(ev::choose({-1.0, -1.0}, {"a", "b"}).pred == 0);  // ties: the first (numpy argmax)
}

TEST_CASE("the regex filter follows Python's findall and lm-eval's group_select/fallback") {
  ev::RegexFilterSpec f{R"(#### (\-?[0-9\.\,]+))", 0, "[invalid]"};
  CHECK(ev::apply_regex_filter(f, "so #### 42 and #### 7") == "42");
  f.group_select = -1;
  CHECK(ev::apply_regex_filter(f, "so #### 42 and #### 7") == "7");
  CHECK(ev::apply_regex_filter(f, "no answer") == "[invalid]");
  ev::RegexFilterSpec whole{R"([A-D])", 0, "?"};
  CHECK(ev::apply_regex_filter(whole, "  the answer is B") == "B");
  ev::RegexFilterSpec groups{R"((\d+)|([a-z]+))", 0, "?"};
  CHECK(ev::apply_regex_filter(groups, "word 12") == "word");  // a tuple: its first non-empty group
}

TEST_CASE("exact_match applies regexes_to_ignore, ignore_case and ignore_punctuation") {
  ev::MetricSpec m;
  m.metric = "exact_match";
  CHECK(ev::exact_match(m, "Paris", "Paris"));
  CHECK_FALSE(ev::exact_match(m, "paris.", "Paris"));
  m.ignore_case = true;
  m.ignore_punctuation = true;
  CHECK(ev::exact_match(m, "paris.", "Paris"));
  m.regexes_to_ignore = {",", "\\$"};
  CHECK(ev::exact_match(m, "$1,000", "1000"));
}

TEST_CASE("mean with the sample standard error") {
  const ev::Aggregate a = ev::mean_with_stderr({1, 0, 1, 1});
  CHECK(a.value == doctest::Approx(0.75));
  CHECK(a.stderr_value == doctest::Approx(0.5 / 2.0));  // std (ddof 1) 0.5, sqrt(4) = 2
  CHECK(std::isnan(ev::mean_with_stderr({1}).stderr_value));
}
