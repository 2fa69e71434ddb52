// A parser for llama.cpp's GBNF grammar notation (grammars/README.md upstream), the subset
// documented in this plugin's README:
//
//   root   ::= "{" ws pair ("," ws pair)* "}"     # rules; `#` starts a comment
//   pair   ::= [a-z]+ ":" ws ( num | "null" )    # sequences, groups, alternation
//   num    ::= "-"? [0-9]{1,6} ("." [0-9]+)?     # * + ? {m} {m,} {m,n} {,n}
//   ws     ::= [ \t\n]*                           # classes: ranges, ^ negation, escapes
//
// Literals and classes take the escapes \n \r \t \\ \" \[ \] \- \^ \xHH \uHHHH \UHHHHHHHH;
// `.` is any code point. A rule ends at the end of its line, except after `::=` and `|` and
// inside parentheses. Repetitions become generated rules the way llama.cpp rewrites them
// (x* -> r ::= x r | ; x{0,n} as nested optionals, not n copies of x?), capped at 2000.
// Refused with a GrammarSyntaxError giving line and column: syntax errors, undefined rules,
// a rule defined twice, a missing start rule, and left recursion (also through rules that
// can match the empty string, e.g. (x?)*), which a top-down matcher cannot run; groups nested
// deeper than kMaxNesting.
#ifndef PATCHBAY_PLUGINS_SAMPLER_GRAMMAR_GBNF_PARSER_HPP_
#define PATCHBAY_PLUGINS_SAMPLER_GRAMMAR_GBNF_PARSER_HPP_

#include <cstddef>
#include <stdexcept>
#include <string>
#include <string_view>

#include "grammar_rules.hpp"

namespace sampler_grammar {

class GrammarSyntaxError : public std::runtime_error {
 public:
  GrammarSyntaxError(size_t line, size_t column, const std::string& message)
      : std::runtime_error("line " + std::to_string(line) + ", column " + std::to_string(column) +
                           ": " + message),
        line_(line),
        column_(column) {}
  size_t line() const { return line_; }
  size_t column() const { return column_; }

 private:
  size_t line_, column_;
};

inline constexpr uint32_t kMaxRepetition = 2000;
// Deepest nesting of parenthesised groups (a regex's groups count one level more). The parser,
// and the matcher that expands rules, recurse once per level: the bound keeps a hostile grammar
// an error instead of a stack overflow, far above what a real grammar uses.
inline constexpr uint32_t kMaxNesting = 256;
// Most rule expansions the matcher (grammar_automaton.cpp) nests before it reaches a character
// (a ::= b ..., b ::= c ..., optional items in a row that may each be skipped): it recurses
// once per expansion, so a longer chain is an error (std::runtime_error), not a stack overflow.
// Sized for AddressSanitizer builds too, whose frames are several times larger: 4000 overflowed
// an 8 MiB stack there (scripts/ci/sanitizer_tests.sh).
inline constexpr uint32_t kMaxExpansionDepth = 1024;

// Parses `text` (UTF-8) with `root` as the start rule.
Grammar parse_gbnf(std::string_view text, std::string_view root = "root");

// Decodes one UTF-8 code point at text[pos], advancing pos; throws std::invalid_argument for
// invalid UTF-8.
uint32_t decode_utf8_at(std::string_view text, size_t& pos);

}  // namespace sampler_grammar

#endif  // PATCHBAY_PLUGINS_SAMPLER_GRAMMAR_GBNF_PARSER_HPP_
