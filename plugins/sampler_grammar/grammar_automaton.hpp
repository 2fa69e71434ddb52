// The grammar's pushdown automaton, determinised lazily over BYTES.
//
// Matching follows llama.cpp's grammar sampler: a parse position is a stack of element
// positions (the top is the terminal to match next, the rest are the continuations of the
// rules entered), and the parser state is the SET of stacks of all parses still alive; an
// empty stack means the grammar can end there. Reading one code point replaces every stack
// whose top terminal matches by its successor, expanded until its top is a terminal again.
//
// Differences that make masking cheap:
//  - Stacks are persistent linked lists (node = (position, parent)) interned in a table, so a
//    stack is an int and equal stacks are equal ints; a set of stacks is interned too.
//  - Code points are decoded from bytes inside the automaton: a state is (stack set, partial
//    UTF-8 sequence: value so far, bytes remaining, length), so a token may end in the middle
//    of a character and the next token finishes it. A partial character survives only if
//    some stack's terminal can match a code point with that prefix (an exact range test).
//  - step_byte(state, byte) is memoised in a 256-entry row per state: once a state has been
//    seen, walking a token (or the whole token trie) costs one table lookup per byte.
// The memo only ever grows and never changes an answer, so sharing one automaton between
// clones of a sampler (beam search) is invisible to them; callers serialise access.
#ifndef PATCHBAY_PLUGINS_SAMPLER_GRAMMAR_GRAMMAR_AUTOMATON_HPP_
#define PATCHBAY_PLUGINS_SAMPLER_GRAMMAR_GRAMMAR_AUTOMATON_HPP_

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "grammar_rules.hpp"

namespace sampler_grammar {

class GrammarAutomaton {
 public:
  static constexpr int32_t kDead = -1;
  // Growth limit: a grammar whose live parses keep multiplying (deep nesting, heavy ambiguity)
  // is refused with an error past this many states instead of exhausting memory.
  static constexpr size_t kMaxStates = 1 << 17;  // 128 MiB of transition rows
  // The same for the parses alive at once (stacks in one set) and the stack nodes of all of
  // them: an ambiguous recursive rule (`root ::= [a-z] root{0,3} ...`) multiplies the parses
  // with every character read, and each step costs their number.
  static constexpr size_t kMaxLiveParses = 1 << 14;
  static constexpr size_t kMaxStackNodes = 1 << 22;

  explicit GrammarAutomaton(const Grammar& grammar);

  int32_t initial_state() const { return initial_; }
  // The state after reading `byte`, or kDead.
  int32_t step_byte(int32_t state, uint8_t byte);
  // The state after reading all of `bytes`, or kDead.
  int32_t step_bytes(int32_t state, std::string_view bytes);
  // The text read so far is a complete sentence of the grammar (no partial character).
  bool accepting(int32_t state) const;
  size_t state_count() const { return states_.size(); }

 private:
  struct StackNode {
    int32_t pos;     // index into elems_
    int32_t parent;  // node id, -1 = bottom
  };
  struct State {
    int32_t set;
    uint32_t partial;   // code point bits read so far
    uint8_t remaining;  // continuation bytes still expected (0: at a character boundary)
    uint8_t length;     // total bytes of the character being read
  };

  int32_t push(int32_t parent, int32_t pos);
  const std::vector<int32_t>& advance(int32_t stack);
  void expand_rule(uint32_t rule, int32_t rest, std::vector<int32_t>& out);
  int32_t intern_set(std::vector<int32_t> stacks);
  int32_t step_code_point(int32_t set, uint32_t cp);
  bool can_start(int32_t set, uint32_t lo, uint32_t hi) const;
  int32_t intern_state(const State& s);
  int32_t compute_step(int32_t state, uint8_t byte);

  std::vector<Element> elems_;       // all rules concatenated
  std::vector<int32_t> rule_start_;  // rule index -> first element
  std::vector<StackNode> nodes_;
  std::unordered_map<uint64_t, int32_t> node_ids_;
  std::unordered_map<int32_t, std::vector<int32_t>> advanced_;  // stack -> terminal-topped stacks
  uint32_t expansion_depth_ = 0;  // advance() calls on the C++ stack (kMaxExpansionDepth)
  std::vector<std::vector<int32_t>> sets_;                      // sorted, unique; -1 = empty stack
  std::unordered_map<std::string_view, int32_t> set_ids_;       // keys view set_keys_
  std::vector<std::unique_ptr<std::string>> set_keys_;
  std::unordered_map<uint64_t, int32_t> code_point_steps_;  // (set, cp) -> set or kDead
  std::vector<State> states_;
  std::unordered_map<uint64_t, int32_t> state_ids_;
  std::vector<int32_t> transitions_;  // states_.size() * 256, kUnknown until computed
  int32_t initial_ = kDead;
};

}  // namespace sampler_grammar

#endif  // PATCHBAY_PLUGINS_SAMPLER_GRAMMAR_GRAMMAR_AUTOMATON_HPP_
