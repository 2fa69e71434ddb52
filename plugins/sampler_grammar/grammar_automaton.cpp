// GrammarAutomaton (see grammar_automaton.hpp).
#include "grammar_automaton.hpp"

#include <algorithm>
#include <cstring>
#include <stdexcept>
#include <string>

#include "gbnf_parser.hpp"

namespace sampler_grammar {
namespace {

constexpr int32_t kUnknown = -2;

uint64_t pair_key(int32_t a, uint32_t b) {
  return (static_cast<uint64_t>(static_cast<uint32_t>(a)) << 32) | b;
}

// Smallest code point of a UTF-8 sequence of `length` bytes (shorter encodings are overlong).
uint32_t min_code_point(uint8_t length) {
  return length == 2 ? 0x80 : length == 3 ? 0x800 : 0x10000;
}

}  // namespace

GrammarAutomaton::GrammarAutomaton(const Grammar& grammar) {
  for (const std::vector<Element>& rule : grammar.rules) {
    rule_start_.push_back(static_cast<int32_t>(elems_.size()));
    elems_.insert(elems_.end(), rule.begin(), rule.end());
  }
  std::vector<int32_t> stacks;
  expand_rule(grammar.root, -1, stacks);
  const int32_t set = intern_set(std::move(stacks));
  initial_ = set == kDead ? kDead : intern_state(State{set, 0, 0, 0});
}

int32_t GrammarAutomaton::push(int32_t parent, int32_t pos) {
  const uint64_t key = pair_key(parent, static_cast<uint32_t>(pos));
  const auto found = node_ids_.find(key);
  if (found != node_ids_.end()) return found->second;
  if (nodes_.size() >= kMaxStackNodes) {
    throw std::runtime_error("the grammar's parse stacks grew past " +
                             std::to_string(kMaxStackNodes) +
                             " nodes (a deeply nested or very ambiguous grammar); simplify the "
                             "grammar");
  }
  const auto id = static_cast<int32_t>(nodes_.size());
  nodes_.push_back({pos, parent});
  node_ids_.emplace(key, id);
  return id;
}

// Every alternative of `rule` started on top of `rest`, expanded to terminal tops.
void GrammarAutomaton::expand_rule(uint32_t rule, int32_t rest, std::vector<int32_t>& out) {
  int32_t a = rule_start_[rule];
  while (true) {
    if (is_end_of_alternative(elems_[a].op)) {
      const std::vector<int32_t>& done = advance(rest);  // empty alternative
      out.insert(out.end(), done.begin(), done.end());
    } else {
      const std::vector<int32_t>& done = advance(push(rest, a));
      out.insert(out.end(), done.begin(), done.end());
      while (!is_end_of_alternative(elems_[a].op)) ++a;
    }
    if (elems_[a].op == Op::End) break;
    ++a;  // past Alt
  }
}

// The stacks reachable from `stack` without reading input whose top is a terminal (or the
// empty stack -1). The grammar has no left recursion (the parser refuses it), so this ends.
const std::vector<int32_t>& GrammarAutomaton::advance(int32_t stack) {
  const auto found = advanced_.find(stack);
  if (found != advanced_.end()) return found->second;
  if (expansion_depth_ >= kMaxExpansionDepth)
    throw std::runtime_error("the grammar enters more than " + std::to_string(kMaxExpansionDepth) +
                             " rules in a row before reading a character; flatten its chain of "
                             "rules or of optional items");
  struct DepthGuard {
    uint32_t& depth;
    explicit DepthGuard(uint32_t& d) : depth(d) { ++depth; }
    ~DepthGuard() { --depth; }
  } guard(expansion_depth_);
  std::vector<int32_t> out;
  if (stack == -1) {
    out.push_back(-1);
  } else {
    const StackNode node = nodes_[static_cast<size_t>(stack)];
    const Element& e = elems_[static_cast<size_t>(node.pos)];
    if (e.op == Op::RuleRef) {
      const int32_t next = node.pos + 1;
      const int32_t rest =
          is_end_of_alternative(elems_[next].op) ? node.parent : push(node.parent, next);
      expand_rule(e.value, rest, out);
    } else {
      out.push_back(stack);  // a terminal on top
    }
  }
  std::sort(out.begin(), out.end());
  out.erase(std::unique(out.begin(), out.end()), out.end());
  return advanced_.emplace(stack, std::move(out)).first->second;  // map nodes are stable
}

int32_t GrammarAutomaton::intern_set(std::vector<int32_t> stacks) {
  if (stacks.empty()) return kDead;
  std::sort(stacks.begin(), stacks.end());
  stacks.erase(std::unique(stacks.begin(), stacks.end()), stacks.end());
  if (stacks.size() > kMaxLiveParses) {
    throw std::runtime_error("the grammar has " + std::to_string(stacks.size()) +
                             " parses alive at once, more than " + std::to_string(kMaxLiveParses) +
                             " (a very ambiguous grammar: a recursive rule that can match the "
                             "same text in many ways); simplify the grammar");
  }
  auto key = std::make_unique<std::string>(reinterpret_cast<const char*>(stacks.data()),
                                           stacks.size() * sizeof(int32_t));
  const auto found = set_ids_.find(*key);
  if (found != set_ids_.end()) return found->second;
  const auto id = static_cast<int32_t>(sets_.size());
  sets_.push_back(std::move(stacks));
  set_ids_.emplace(std::string_view(*key), id);
  set_keys_.push_back(std::move(key));
  return id;
}

int32_t GrammarAutomaton::step_code_point(int32_t set, uint32_t cp) {
  const uint64_t key = pair_key(set, cp);
  const auto found = code_point_steps_.find(key);
  if (found != code_point_steps_.end()) return found->second;
  std::vector<int32_t> next;
  const std::vector<int32_t> stacks = sets_[static_cast<size_t>(set)];  // copy: sets_ may grow
  for (const int32_t stack : stacks) {
    if (stack == -1) continue;
    const StackNode node = nodes_[static_cast<size_t>(stack)];
    int32_t pos = node.pos;
    const bool positive = elems_[pos].op != Op::CharNot;
    bool found_match = false;
    do {  // Char/CharNot/CharAny then CharAlt / CharRngUpper elements of the same class
      if (elems_[pos].op == Op::CharAny) {
        found_match = true;
        pos += 1;
      } else if (elems_[pos + 1].op == Op::CharRngUpper) {
        found_match = found_match || (elems_[pos].value <= cp && cp <= elems_[pos + 1].value);
        pos += 2;
      } else {
        found_match = found_match || elems_[pos].value == cp;
        pos += 1;
      }
    } while (elems_[pos].op == Op::CharAlt);
    if (found_match != positive) continue;
    const int32_t rest =
        is_end_of_alternative(elems_[pos].op) ? node.parent : push(node.parent, pos);
    const std::vector<int32_t>& done = advance(rest);
    next.insert(next.end(), done.begin(), done.end());
  }
  const int32_t result = intern_set(std::move(next));
  code_point_steps_.emplace(key, result);
  return result;
}

// Some stack of `set` can read a code point in [lo, hi] (exact for ranges and negations).
bool GrammarAutomaton::can_start(int32_t set, uint32_t lo, uint32_t hi) const {
  for (const int32_t stack : sets_[static_cast<size_t>(set)]) {
    if (stack == -1) continue;
    int32_t pos = nodes_[static_cast<size_t>(stack)].pos;
    if (elems_[pos].op == Op::CharAny) return true;
    const bool positive = elems_[pos].op == Op::Char;
    std::vector<std::pair<uint32_t, uint32_t>> ranges;
    do {
      if (elems_[pos + 1].op == Op::CharRngUpper) {
        ranges.emplace_back(elems_[pos].value, elems_[pos + 1].value);
        pos += 2;
      } else {
        ranges.emplace_back(elems_[pos].value, elems_[pos].value);
        pos += 1;
      }
    } while (elems_[pos].op == Op::CharAlt);
    if (positive) {
      for (const auto& [a, b] : ranges) {
        if (a <= hi && lo <= b) return true;
      }
    } else {  // some point of [lo, hi] outside every range?
      std::sort(ranges.begin(), ranges.end());
      uint64_t next_uncovered = lo;
      for (const auto& [a, b] : ranges) {
        if (a > next_uncovered) break;
        next_uncovered = std::max<uint64_t>(next_uncovered, static_cast<uint64_t>(b) + 1);
      }
      if (next_uncovered <= hi) return true;
    }
  }
  return false;
}

int32_t GrammarAutomaton::intern_state(const State& s) {
  const uint64_t key = (static_cast<uint64_t>(static_cast<uint32_t>(s.set)) << 32) ^
                       (static_cast<uint64_t>(s.partial) << 8) ^
                       (static_cast<uint64_t>(s.remaining) << 4) ^ s.length;
  // partial < 2^21, so (partial << 8 | remaining << 4 | length) < 2^29 never reaches the set bits.
  const auto found = state_ids_.find(key);
  if (found != state_ids_.end()) return found->second;
  if (states_.size() >= kMaxStates) {
    throw std::runtime_error(
        "the grammar automaton grew past " + std::to_string(kMaxStates) +
        " states (a deeply nested or very ambiguous grammar); simplify the grammar");
  }
  const auto id = static_cast<int32_t>(states_.size());
  states_.push_back(s);
  state_ids_.emplace(key, id);
  transitions_.resize(transitions_.size() + 256, kUnknown);
  return id;
}

int32_t GrammarAutomaton::compute_step(int32_t state, uint8_t byte) {
  const State s = states_[static_cast<size_t>(state)];
  if (s.remaining == 0) {
    if (byte < 0x80) {
      const int32_t set = step_code_point(s.set, byte);
      return set == kDead ? kDead : intern_state(State{set, 0, 0, 0});
    }
    uint8_t length = 0;
    uint32_t bits = 0;
    if (byte >= 0xC2 && byte <= 0xDF) {
      length = 2;
      bits = byte & 0x1Fu;
    } else if (byte >= 0xE0 && byte <= 0xEF) {
      length = 3;
      bits = byte & 0x0Fu;
    } else if (byte >= 0xF0 && byte <= 0xF4) {
      length = 4;
      bits = byte & 0x07u;
    } else {
      return kDead;  // a continuation byte or an invalid lead byte
    }
    const State next{s.set, bits, static_cast<uint8_t>(length - 1), length};
    const uint32_t shift = 6u * next.remaining;
    const uint32_t lo = std::max(bits << shift, min_code_point(length));
    const uint32_t hi = std::min(((bits + 1) << shift) - 1, 0x10FFFFu);
    return lo <= hi && can_start(s.set, lo, hi) ? intern_state(next) : kDead;
  }
  if ((byte & 0xC0) != 0x80) return kDead;
  const uint32_t bits = (s.partial << 6) | (byte & 0x3Fu);
  const auto remaining = static_cast<uint8_t>(s.remaining - 1);
  if (remaining == 0) {
    if (bits < min_code_point(s.length) || bits > 0x10FFFF || (bits >= 0xD800 && bits <= 0xDFFF))
      return kDead;
    const int32_t set = step_code_point(s.set, bits);
    return set == kDead ? kDead : intern_state(State{set, 0, 0, 0});
  }
  const uint32_t shift = 6u * remaining;
  const uint32_t lo = std::max(bits << shift, min_code_point(s.length));
  const uint32_t hi = std::min(((bits + 1) << shift) - 1, 0x10FFFFu);
  return lo <= hi && can_start(s.set, lo, hi)
             ? intern_state(State{s.set, bits, remaining, s.length})
             : kDead;
}

int32_t GrammarAutomaton::step_byte(int32_t state, uint8_t byte) {
  const size_t slot = static_cast<size_t>(state) * 256 + byte;
  int32_t next = transitions_[slot];
  if (next == kUnknown) {
    next = compute_step(state, byte);
    transitions_[static_cast<size_t>(state) * 256 + byte] = next;  // transitions_ may have grown
  }
  return next;
}

int32_t GrammarAutomaton::step_bytes(int32_t state, std::string_view bytes) {
  for (const char c : bytes) {
    if (state == kDead) return kDead;
    state = step_byte(state, static_cast<uint8_t>(c));
  }
  return state;
}

bool GrammarAutomaton::accepting(int32_t state) const {
  if (state == kDead) return false;
  const State& s = states_[static_cast<size_t>(state)];
  return s.remaining == 0 && !sets_[static_cast<size_t>(s.set)].empty() &&
         sets_[static_cast<size_t>(s.set)][0] == -1;
}

}  // namespace sampler_grammar
