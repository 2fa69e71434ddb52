// Known answers for the grammar constraint (plugins/sampler_grammar): the GBNF parser and its
// error messages, the regex translation against std::regex, the automaton on strings
// (accepted, rejected, partial UTF-8), the token index (a token spanning several elements,
// characters split across tokens, end-of-sequence only when complete) and the component
// (apply / accept / reset / clone).
#include <doctest/doctest.h>

#include <cmath>
#include <regex>
#include <string>
#include <vector>

#include "gbnf_parser.hpp"
#include "grammar_automaton.hpp"
#include "grammar_constraint.hpp"
#include "patchbay/testing/sampler_conformance.hpp"
#include "regex_to_gbnf.hpp"
#include "token_index.hpp"

using namespace sampler_grammar;

namespace {

bool matches(const Grammar& g, const std::string& text) {
  GrammarAutomaton a(g);
  return a.accepting(a.step_bytes(a.initial_state(), text));
}
bool matches(const std::string& gbnf, const std::string& text) {
  return matches(parse_gbnf(gbnf), text);
}
bool viable_prefix(const std::string& gbnf, const std::string& text) {
  GrammarAutomaton a(parse_gbnf(gbnf));
  return a.step_bytes(a.initial_state(), text) != GrammarAutomaton::kDead;
}

std::string syntax_error(const std::string& gbnf, size_t& line, size_t& column) {
  try {
    parse_gbnf(gbnf);
  } catch (const GrammarSyntaxError& e) {
    line = e.line();
    column = e.column();
    return e.what();
  }
  return "";
}

// A small vocabulary; the last id is the end-of-sequence token.
struct TestVocab {
  std::vector<std::string> bytes;
  std::vector<uint8_t> eos;
  int32_t add(const std::string& b, bool end = false) {
    bytes.push_back(b);
    eos.push_back(end ? 1 : 0);
    return static_cast<int32_t>(bytes.size() - 1);
  }
  pb_sampler_vocabulary view(std::string& flat, std::vector<size_t>& offsets) const {
    flat.clear();
    offsets.assign(1, 0);
    for (const std::string& b : bytes) {
      flat += b;
      offsets.push_back(flat.size());
    }
    return pb_sampler_vocabulary{sizeof(pb_sampler_vocabulary), bytes.size(), flat.data(),
                                 offsets.data(), eos.data()};
  }
};

std::vector<std::string> texts_of(const TestVocab& v, const std::vector<int32_t>& ids) {
  std::vector<std::string> out;
  for (int32_t id : ids)
    out.push_back(v.eos[static_cast<size_t>(id)] ? "<eos>" : v.bytes[static_cast<size_t>(id)]);
  return out;
}

}  // namespace

TEST_CASE("GBNF: sequences, alternation, classes, repetition accept and reject the right strings") {
  const std::string g = "root ::= \"a\" [b-d]* \"e\" | \"x\"{2,3} | (\"p\" | \"q\")+ \"!\"?\n";
  for (const char* ok : {"ae", "abe", "abcdde", "xx", "xxx", "p", "pqqp", "pq!"})
    CHECK_MESSAGE(matches(g, ok), ok);
  for (const char* bad : {"", "a", "abfe", "x", "xxxx", "!", "pq!!", "aee"})
    CHECK_MESSAGE(!matches(g, bad), bad);
  // Negated classes, escapes, `.`, {m}, {,n}, comments and rules over several lines.
  const std::string h =
      "# a quoted string, then a tag\n"
      "root ::= str tag  # trailing comment\n"
      "str  ::= \"\\\"\" ( [^\"\\\\] | \"\\\\\" . )* \"\\\"\"\n"
      "tag  ::= (\n  \"\\x41\"{3} |\n  [0-9]{,2}\n)\n";
  for (const char* ok : {"\"\"AAA", "\"ab\\\"c\"", "\"\"", "\"x\"12", "\"\\\\\"7"})
    CHECK_MESSAGE(matches(h, ok), ok);
  for (const char* bad : {"\"a\"\"", "\"a", "\"\"AA", "\"\"123", "\"\\\""})
    CHECK_MESSAGE(!matches(h, bad), bad);
}

TEST_CASE(
    "GBNF: code points, UTF-8 read byte by byte, partial characters kept only when they can "
    "match") {
  const std::string g = "root ::= [α-ω]+ \"é\"?\n";
  CHECK(matches(g, "αβγ"));
  CHECK(matches(g, "ωé"));
  CHECK(!matches(g, "a"));
  CHECK(!matches(g, "é"));
  // α = CE B1: the lead byte alone is a viable prefix, a wrong continuation is not.
  CHECK(viable_prefix(g, "\xCE"));
  CHECK(!matches(g, "\xCE"));  // not complete
  CHECK(!viable_prefix(g, "\xCE\x41"));
  // A lead byte whose characters all lie outside the class is refused at once (D0 = U+0400..).
  CHECK(!viable_prefix(g, "\xD0"));
  // Invalid UTF-8 never matches, even where `.` would take any code point.
  CHECK(!viable_prefix("root ::= .*\n", "\xC0\x80"));
  CHECK(!viable_prefix("root ::= .*\n", "\xFF"));
  CHECK(matches("root ::= .*\n", "中文 ok"));
  // A negated class lets through a partial character unless its whole range is excluded.
  CHECK(viable_prefix("root ::= [^a]\n", "\xE4"));
  CHECK(!viable_prefix("root ::= [^\\u4000-\\u4FFF]\n", "\xE4"));  // E4 = U+4000..U+4FFF
}

TEST_CASE("GBNF: parse errors name line and column") {
  size_t line = 0, column = 0;
  std::string m = syntax_error("root ::= item\n", line, column);
  CHECK(m.find("'item' is used but never defined") != std::string::npos);
  CHECK(line == 1);
  CHECK(column == 10);
  m = syntax_error("root ::= \"a\"\nnext \"b\"\n", line, column);
  CHECK(m.find("expected '::='") != std::string::npos);
  CHECK(line == 2);
  CHECK(column == 6);
  m = syntax_error("root ::= \"abc\n", line, column);
  CHECK(m.find("unterminated string literal") != std::string::npos);
  CHECK(line == 1);
  CHECK(column == 10);
  m = syntax_error("root ::= expr\nexpr ::= expr \"+\" \"1\" | \"1\"\n", line, column);
  CHECK(m.find("left recursion detected (expr -> expr)") != std::string::npos);
  CHECK(line == 2);
  m = syntax_error("root ::= (\"a\"?)*\n", line, column);
  CHECK(m.find("left recursion") != std::string::npos);
  m = syntax_error("start ::= \"a\"\n", line, column);
  CHECK(m.find("no rule named 'root'") != std::string::npos);
  m = syntax_error("root ::= [a-z\n", line, column);
  CHECK(m.find("unterminated character class") != std::string::npos);
  m = syntax_error("root ::= \"\\q\"\n", line, column);
  CHECK(m.find("unknown escape \\q") != std::string::npos);
  CHECK(column == 12);
  m = syntax_error("root ::= \"a\"{3,2}\n", line, column);
  CHECK(m.find("n < m") != std::string::npos);
  m = syntax_error("root ::= * \"a\"\n", line, column);
  CHECK(m.find("nothing before it to repeat") != std::string::npos);
  m = syntax_error("root ::= \"a\"\nroot ::= \"b\"\n", line, column);
  CHECK(m.find("defined twice") != std::string::npos);
  CHECK(line == 2);
  m = syntax_error("root ::= [z-a]\n", line, column);
  CHECK(m.find("goes backwards") != std::string::npos);
}

TEST_CASE("regex constraints agree with std::regex on every string of a small alphabet") {
  const std::vector<std::string> regexes = {
      "a(b|c)*d?",  "[0-9]{2,3}",       "(?:ab|a)+c", "[^b]x?",      "\\d+\\.\\d{1,2}", "a.c",
      "(a|)b{0,2}", "[a-c\\d]+[^a-c]?", "x{2,}",      "\\w\\s?\\W?", "^(ab)?c*$",       "a|b|cd+",
      "[-a]+",      "\\(a\\)|\\.+",     "a{0,3}?b",
  };
  const std::string alphabet = "abcdx0129 .()-";
  for (const std::string& r : regexes) {
    const Grammar g = compile_regex(r);
    const std::regex oracle(r, std::regex::ECMAScript);
    // All strings up to length 3 over the alphabet, and some longer ones.
    std::vector<std::string> strings{""};
    for (size_t length = 1; length <= 3; ++length) {
      const size_t before = strings.size();
      for (size_t i = 0; i < before; ++i) {
        if (strings[i].size() != length - 1) continue;
        for (char c : alphabet) strings.push_back(strings[i] + c);
      }
    }
    for (const char* s :
         {"abcbcd", "1234", "12.34", "ababac", "xxxxx", "aaab", "(a)", "...", "a\nc"})
      strings.push_back(s);
    for (const std::string& s : strings) {
      CHECK_MESSAGE(matches(g, s) == std::regex_match(s, oracle),
                    "regex " << r << " on \"" << s << "\"");
    }
  }
}

TEST_CASE("regex errors point into the regex") {
  const auto error_of = [](const std::string& r) -> std::string {
    try {
      compile_regex(r);
    } catch (const GrammarSyntaxError& e) {
      return e.what();
    }
    return "";
  };
  CHECK(error_of("(ab").find("column 1: regex: '(' is not closed") != std::string::npos);
  CHECK(error_of("ab)").find("column 3: regex: ')' without a matching '('") != std::string::npos);
  CHECK(error_of("a(\\1)").find("backreferences are not supported") != std::string::npos);
  CHECK(error_of("(?=a)").find("lookaround") != std::string::npos);
  CHECK(error_of("*a").find("nothing before it to repeat") != std::string::npos);
  CHECK(error_of("a{3,1}").find("n < m") != std::string::npos);
  CHECK(error_of("a^b").find("anchors") != std::string::npos);
}

TEST_CASE(
    "token index: tokens spanning elements, split characters, end-of-sequence only when complete") {
  TestVocab v;
  const int32_t open_quote = v.add("{\"");  // spans two elements
  const int32_t brace = v.add("{");
  const int32_t quote = v.add("\"");
  const int32_t key = v.add("ab");
  const int32_t key_end = v.add("b\":");  // spans the end of the string, the colon
  const int32_t colon = v.add(":");
  const int32_t digits = v.add("12");
  const int32_t close = v.add("}");
  const int32_t digit_close = v.add("3}");
  const int32_t e_lead = v.add("\xC3");  // é = C3 A9 split in two tokens
  const int32_t e_tail = v.add("\xA9");
  const int32_t e_whole = v.add("é");
  const int32_t empty = v.add("");
  const int32_t eos = v.add("<|endoftext|>", true);
  const Grammar g = parse_gbnf("root ::= \"{\" \"\\\"\" [a-zé]+ \"\\\":\" [0-9]+ \"}\"\n");
  GrammarIndex index(g, v.bytes, v.eos);
  int32_t s = index.initial_state();
  CHECK(index.allowed(s) == std::vector<int32_t>{open_quote, brace});
  s = index.advance(s, brace);
  CHECK(index.allowed(s) == std::vector<int32_t>{quote});
  s = index.advance(s, quote);
  // Inside the string: letters, the split é (its lead byte alone is allowed), not the tail.
  CHECK(index.allowed(s) == std::vector<int32_t>{key, key_end, e_lead, e_whole});
  s = index.advance(s, e_lead);
  CHECK(index.allowed(s) == std::vector<int32_t>{e_tail});
  s = index.advance(s, e_tail);
  CHECK(index.allowed(s) == std::vector<int32_t>{quote, key, key_end, e_lead, e_whole});
  s = index.advance(s, key_end);
  CHECK(index.allowed(s) == std::vector<int32_t>{digits, digit_close});
  CHECK(!index.accepting(s));
  s = index.advance(s, digits);
  CHECK(index.allowed(s) == std::vector<int32_t>{digits, close, digit_close});
  s = index.advance(s, digit_close);
  CHECK(index.accepting(s));
  CHECK(index.allowed(s) == std::vector<int32_t>{eos});
  CHECK(index.advance(s, colon) == GrammarAutomaton::kDead);
  CHECK(index.advance(index.initial_state(), empty) == GrammarAutomaton::kDead);
  CHECK(texts_of(v, index.allowed(s)) == std::vector<std::string>{"<eos>"});
}

TEST_CASE("the grammar component masks logits, checks accepted tokens, resets and clones") {
  TestVocab v;
  const int32_t a = v.add("a");
  const int32_t b = v.add("b");
  const int32_t ab = v.add("ab");
  const int32_t eos = v.add("", true);
  std::string flat;
  std::vector<size_t> offsets;
  const pb_sampler_vocabulary view = v.view(flat, offsets);
  GrammarConstraint c("regex", "a+b?");
  std::vector<float> logits(4, 0.5f);
  CHECK_THROWS_WITH_AS(c.apply(logits, {}, 0), doctest::Contains("before set_vocabulary"),
                       patchbay::PluginError);
  c.set_vocabulary(patchbay::SamplerVocabulary(view));
  c.apply(logits, {}, 0);
  CHECK(logits == std::vector<float>{0.5f, -INFINITY, 0.5f, -INFINITY});  // EOS not yet
  CHECK_THROWS_WITH_AS(c.accept(eos), doctest::Contains("before the grammar is complete"),
                       patchbay::PluginError);
  CHECK_THROWS_WITH_AS(c.accept(b), doctest::Contains("cannot continue"), patchbay::PluginError);
  c.accept(a);
  GrammarConstraint copy = c;  // clone: same state, independent afterwards
  c.accept(ab);
  logits.assign(4, 0.5f);
  c.apply(logits, {}, 0);
  CHECK(logits ==
        std::vector<float>{-INFINITY, -INFINITY, -INFINITY, 0.5f});  // only EOS after "aab"
  logits.assign(4, 0.5f);
  copy.apply(logits, {}, 0);
  CHECK(logits == std::vector<float>{0.5f, 0.5f, 0.5f, 0.5f});  // after "a": a, b, ab or the end
  c.accept(eos);
  CHECK_THROWS_WITH_AS(c.accept(a), doctest::Contains("after the end-of-sequence"),
                       patchbay::PluginError);
  c.reset();
  logits.assign(4, 0.5f);
  c.apply(logits, {}, 0);
  CHECK(logits == std::vector<float>{0.5f, -INFINITY, 0.5f, -INFINITY});
  // Every allowed token already removed by an earlier processor: an error, not all -inf.
  logits = {-INFINITY, 0.5f, -INFINITY, 0.5f};
  CHECK_THROWS_WITH_AS(c.apply(logits, {}, 0), doctest::Contains("put grammar first"),
                       patchbay::PluginError);
  CHECK_THROWS_WITH_AS(GrammarConstraint("gbnf", "root ::= x\n"),
                       doctest::Contains("gbnf: line 1, column 10"), patchbay::PluginError);
}

TEST_CASE("the grammar component passes the SDK's sampler conformance kit (given a vocabulary)") {
  namespace pt = patchbay::testing;
  TestVocab v;  // 48 ids: 47 one-character tokens and the end-of-sequence id
  const std::string chars = "abcdefghijklmnopqrstuvwxyz0123456789 .,;:!?-+*/(";
  for (size_t i = 0; i + 1 < 48; ++i) v.add(std::string(1, chars[i]));
  v.add("", true);
  std::string flat;
  std::vector<size_t> offsets;
  const pb_sampler_vocabulary view = v.view(flat, offsets);
  pt::SamplerConformanceOptions options;
  options.vocab = 48;
  options.vocabulary = &view;
  pt::SamplerConfig config(kGrammar);
  config.set("regex", std::string("[a-z0-9 .,]*"));
  CHECK(pt::join_failures(pt::check_sampler_conformance(kGrammar, config.view(),
                                                        pt::sampler_test_host(), options)) == "");
  options.vocabulary = nullptr;  // a component that needs the vocabulary and gets none is named
  CHECK(pt::join_failures(pt::check_sampler_conformance(kGrammar, config.view(),
                                                        pt::sampler_test_host(), options))
            .find("pass SamplerConformanceOptions::vocabulary") != std::string::npos);
}
