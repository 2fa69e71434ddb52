// Hostile nesting in grammars and regexes (issue 39): 100K nested groups, a chain of 100K
// rules and 100K optional items in a row are errors with a message, never a stack overflow;
// nesting just inside the limits still parses and matches.
#include <doctest/doctest.h>

#include <string>

#include "gbnf_parser.hpp"
#include "grammar_automaton.hpp"
#include "grammar_constraint.hpp"
#include "regex_to_gbnf.hpp"

using namespace sampler_grammar;

namespace {

std::string nested_gbnf(size_t depth) {
  std::string text = "root ::= ";
  text.append(depth, '(');
  text += "\"x\"";
  text.append(depth, ')');
  text += '\n';
  return text;
}

bool matches(const Grammar& g, const std::string& text) {
  GrammarAutomaton automaton(g);
  return automaton.accepting(automaton.step_bytes(automaton.initial_state(), text));
}

}  // namespace

TEST_CASE("GBNF groups nested 100K deep are refused with the limit named") {
  CHECK_THROWS_WITH_AS(parse_gbnf(nested_gbnf(100000)),
                       doctest::Contains("groups nest deeper than 255 levels"), GrammarSyntaxError);
  const Grammar deep = parse_gbnf(nested_gbnf(kMaxNesting - 1));
  CHECK(matches(deep, "x"));
  CHECK_FALSE(matches(deep, "xx"));
}

TEST_CASE("a regex with 100K nested groups is refused with the limit named") {
  std::string regex(100000, '(');
  regex += 'a';
  regex.append(100000, ')');
  CHECK_THROWS_WITH_AS(compile_regex(regex), doctest::Contains("groups nest deeper than"),
                       GrammarSyntaxError);
  std::string ok(kMaxNesting - 2, '(');
  ok += 'a';
  ok.append(kMaxNesting - 2, ')');
  CHECK(matches(compile_regex(ok), "a"));
}

TEST_CASE(
    "a chain of 100K rules is checked for left recursion without recursing, then refused by "
    "depth") {
  // Appended piece by piece: GCC 12's -Wrestrict misfires on "r" + std::string chains.
  std::string gbnf = "root ::= r0\n";
  for (int i = 0; i < 100000; ++i) {
    gbnf += 'r';
    gbnf += std::to_string(i);
    gbnf += " ::= r";
    gbnf += std::to_string(i + 1);
    gbnf += '\n';
  }
  gbnf += "r100000 ::= \"z\"\n";
  const Grammar chain = parse_gbnf(gbnf);  // no left recursion: parses
  CHECK_THROWS_WITH_AS(GrammarAutomaton{chain},
                       doctest::Contains("rules in a row before reading a character"),
                       std::runtime_error);
  // A left-recursive cycle at the end of a long chain is still found.
  std::string cyclic = gbnf.substr(0, gbnf.rfind("r100000"));
  cyclic += "r100000 ::= r0 \"z\"\n";
  CHECK_THROWS_WITH_AS(parse_gbnf(cyclic), doctest::Contains("left recursion detected"),
                       GrammarSyntaxError);
}

TEST_CASE("100K optional items in a row are an error from the grammar component, not a crash") {
  std::string gbnf = "root ::=";
  for (int i = 0; i < 100000; ++i) gbnf += " \"a\"?";
  gbnf += " \"b\"\n";
  const Grammar g = parse_gbnf(gbnf);
  CHECK_THROWS_WITH_AS(GrammarAutomaton{g}, doctest::Contains("rules in a row"),
                       std::runtime_error);
  // 500 in a row stay within the limit and match.
  std::string fine = "root ::=";
  for (int i = 0; i < 500; ++i) fine += " \"a\"?";
  fine += " \"b\"\n";
  CHECK(matches(parse_gbnf(fine), "aaab"));
}

TEST_CASE("an ambiguous recursive rule is refused by its live parses, in well under a second") {
  // Found by fuzz_gbnf (a 10 s timeout): a digit both starts a root and ends one (d+), so every
  // character read multiplies the parses of root{0,3}, and each step costs their number.
  const Grammar ambiguous = parse_gbnf(
      "root ::= [0-z] root{0,3} d+ (\"xn\" | \"y\")? \".\"*\nd ::= [0-9]\n");
  GrammarAutomaton automaton(ambiguous);
  const std::string letters_digits_letters =
      std::string(72, 'a') + std::string(110, '6') + std::string(60, 'a');
  CHECK_THROWS_WITH_AS(automaton.step_bytes(automaton.initial_state(), letters_digits_letters),
                       doctest::Contains("parses alive at once, more than 16384"),
                       std::runtime_error);
  // A short sentence of the same grammar still matches.
  CHECK(matches(ambiguous, "ab1.2"));
  CHECK_FALSE(matches(ambiguous, "1"));
}
