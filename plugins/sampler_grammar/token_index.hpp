// The vocabulary index of a grammar constraint: a byte trie of every token's text, built
// once per (grammar, vocabulary), and the per-state masks computed by walking it.
//
// mask(state) = the ids whose bytes the automaton can read from `state` (all of them: a token
// that spans several grammar elements or rules is followed element by element, and a token
// that ends inside a UTF-8 character is kept when the character can still match), plus the
// end-of-sequence ids when `state` is accepting. The walk descends the trie with the
// automaton (one memoised table lookup per trie edge) and drops a whole subtree as soon as
// its prefix is dead, instead of testing each of the V tokens from the start; masks are then
// cached per automaton state, so a state that comes back costs one pass over the bitset.
//
// Thread safety: one GrammarIndex may be shared by clones (beam search); every public
// member takes its lock.
#ifndef PATCHBAY_PLUGINS_SAMPLER_GRAMMAR_TOKEN_INDEX_HPP_
#define PATCHBAY_PLUGINS_SAMPLER_GRAMMAR_TOKEN_INDEX_HPP_

#include <cstdint>
#include <mutex>
#include <span>
#include <string>
#include <unordered_map>
#include <vector>

#include "grammar_automaton.hpp"

namespace sampler_grammar {

class TokenTrie {
 public:
  // token_bytes[i]: token i's text; `skip[i]` (end-of-sequence ids, empty tokens) keeps a
  // token out of the trie.
  TokenTrie(const std::vector<std::string>& token_bytes, const std::vector<uint8_t>& skip);
  size_t node_count() const { return nodes_.size(); }

  // Calls on_token(id) for every token the automaton can read from `state`.
  template <class OnToken>
  void walk(GrammarAutomaton& automaton, int32_t state, OnToken&& on_token) const;

 private:
  struct Node {
    uint32_t first_edge, edge_count;    // edges_[first_edge, +edge_count): children
    uint32_t first_token, token_count;  // tokens_[first_token, +token_count): ids ending here
  };
  std::vector<Node> nodes_;  // nodes_[0] is the root (the empty prefix)
  std::vector<uint8_t> edge_byte_;
  std::vector<uint32_t> edge_node_;
  std::vector<int32_t> tokens_;
};

template <class OnToken>
void TokenTrie::walk(GrammarAutomaton& automaton, int32_t state, OnToken&& on_token) const {
  std::vector<std::pair<uint32_t, int32_t>> pending{{0u, state}};
  while (!pending.empty()) {
    const auto [node_id, at] = pending.back();
    pending.pop_back();
    const Node& node = nodes_[node_id];
    for (uint32_t e = node.first_edge; e < node.first_edge + node.edge_count; ++e) {
      const int32_t next = automaton.step_byte(at, edge_byte_[e]);
      if (next == GrammarAutomaton::kDead) continue;
      const Node& child = nodes_[edge_node_[e]];
      for (uint32_t t = child.first_token; t < child.first_token + child.token_count; ++t)
        on_token(tokens_[t]);
      if (child.edge_count > 0) pending.emplace_back(edge_node_[e], next);
    }
  }
}

class GrammarIndex {
 public:
  // Masks kept at most (each vocab/8 bytes); past it the cache starts over.
  static constexpr size_t kMaxCachedMasks = 4096;

  GrammarIndex(const Grammar& grammar, std::vector<std::string> token_bytes,
               std::vector<uint8_t> end_of_sequence);

  int32_t initial_state() const { return initial_; }
  size_t vocab() const { return token_bytes_.size(); }
  bool end_of_sequence(int32_t id) const { return end_of_sequence_[static_cast<size_t>(id)] != 0; }
  bool accepting(int32_t state);
  // The state after token `id` (a text token), or GrammarAutomaton::kDead.
  int32_t advance(int32_t state, int32_t id);
  // Sets every logit the grammar forbids in `state` to -inf; returns how many finite
  // logits remain. `finished`: the sequence already ended, only end-of-sequence ids stay.
  size_t mask_logits(int32_t state, bool finished, std::span<float> logits);
  // The allowed ids of `state` (tests, benchmarks).
  std::vector<int32_t> allowed(int32_t state);
  size_t trie_nodes() const { return trie_.node_count(); }
  size_t automaton_states();

 private:
  const std::vector<uint64_t>& mask_locked(int32_t state);

  std::mutex mutex_;
  GrammarAutomaton automaton_;
  std::vector<std::string> token_bytes_;
  std::vector<uint8_t> end_of_sequence_;
  TokenTrie trie_;
  int32_t initial_;
  std::unordered_map<int32_t, std::vector<uint64_t>> masks_;  // state -> bit per id
};

}  // namespace sampler_grammar

#endif  // PATCHBAY_PLUGINS_SAMPLER_GRAMMAR_TOKEN_INDEX_HPP_
