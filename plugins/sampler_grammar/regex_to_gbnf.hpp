// Regular-expression constraints: a regex is translated into GBNF (one rule, `root`) and
// compiled by the GBNF parser, so both run on the same stack machine and token index.
//
// The whole generated text must match (as if anchored ^...$; a leading ^ and trailing $ are
// accepted and ignored). Supported: literal characters (UTF-8), `.` (any code point but \n),
// classes [abc] [a-z] [^...] with escapes and \d \w \s inside, the escapes \d \D \w \W \s \S
// \n \r \t \f \v \xHH \uHHHH and \ before any punctuation, groups (...) and (?:...),
// alternation |, and the quantifiers * + ? {m} {m,} {m,n} (a lazy `?` after a quantifier is
// accepted: it changes which match a search finds, not which strings match). Refused with a
// GrammarSyntaxError (line 1, column = position in the regex): backreferences, lookaround,
// anchors in the middle, named groups, unbalanced parentheses, a quantifier with nothing
// before it.
#ifndef PATCHBAY_PLUGINS_SAMPLER_GRAMMAR_REGEX_TO_GBNF_HPP_
#define PATCHBAY_PLUGINS_SAMPLER_GRAMMAR_REGEX_TO_GBNF_HPP_

#include <string>
#include <string_view>

#include "grammar_rules.hpp"

namespace sampler_grammar {

// The GBNF text equivalent to `regex` (one line: root ::= ...).
std::string regex_to_gbnf(std::string_view regex);

// regex_to_gbnf then parse_gbnf.
Grammar compile_regex(std::string_view regex);

}  // namespace sampler_grammar

#endif  // PATCHBAY_PLUGINS_SAMPLER_GRAMMAR_REGEX_TO_GBNF_HPP_
