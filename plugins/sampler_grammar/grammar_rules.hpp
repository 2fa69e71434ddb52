// The compiled form of a grammar (GBNF or regex): rules of flat element arrays, the same
// representation llama.cpp's grammar sampler uses.
//
//   rule r := alternative ("Alt" alternative)* "End"
//   alternative := element*        (empty = matches the empty string)
//
// Terminals match one Unicode code point: Char c (then any number of CharAlt c' and
// CharRngUpper u, where CharRngUpper u turns the element before it into the range [prev, u]),
// CharNot (the same, negated), CharAny (every code point). RuleRef r expands rule r.
// Repetitions (* + ? {m,n}) and groups are already rewritten into generated rules, so the
// matcher (grammar_automaton.hpp) only sees sequences, alternatives and references.
#ifndef PATCHBAY_PLUGINS_SAMPLER_GRAMMAR_GRAMMAR_RULES_HPP_
#define PATCHBAY_PLUGINS_SAMPLER_GRAMMAR_GRAMMAR_RULES_HPP_

#include <cstdint>
#include <string>
#include <vector>

namespace sampler_grammar {

enum class Op : uint8_t { End, Alt, RuleRef, Char, CharNot, CharAlt, CharRngUpper, CharAny };

struct Element {
  Op op;
  uint32_t value;  // code point (Char*), rule index (RuleRef), 0 otherwise
};

struct Grammar {
  std::vector<std::vector<Element>> rules;  // each ends with End
  std::vector<std::string> names;           // rule names (generated ones: "name_3")
  uint32_t root = 0;
};

// True for the elements that start a one-code-point terminal.
inline bool is_terminal_start(Op op) {
  return op == Op::Char || op == Op::CharNot || op == Op::CharAny;
}
inline bool is_end_of_alternative(Op op) { return op == Op::End || op == Op::Alt; }

}  // namespace sampler_grammar

#endif  // PATCHBAY_PLUGINS_SAMPLER_GRAMMAR_GRAMMAR_RULES_HPP_
