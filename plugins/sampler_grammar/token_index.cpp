// TokenTrie and GrammarIndex (see token_index.hpp).
#include "token_index.hpp"

#include <cmath>
#include <map>

namespace sampler_grammar {

TokenTrie::TokenTrie(const std::vector<std::string>& token_bytes,
                     const std::vector<uint8_t>& skip) {
  // Build with ordered child maps, then flatten breadth-first so every node's edges are
  // contiguous (the walk reads them in order).
  std::vector<std::map<uint8_t, uint32_t>> children(1);
  std::vector<std::vector<int32_t>> ending(1);
  for (size_t id = 0; id < token_bytes.size(); ++id) {
    if (skip[id] != 0 || token_bytes[id].empty()) continue;
    uint32_t node = 0;
    for (const char c : token_bytes[id]) {
      const auto byte = static_cast<uint8_t>(c);
      const auto found = children[node].find(byte);
      if (found != children[node].end()) {
        node = found->second;
        continue;
      }
      const auto created = static_cast<uint32_t>(children.size());
      children[node].emplace(byte, created);
      children.emplace_back();
      ending.emplace_back();
      node = created;
    }
    ending[node].push_back(static_cast<int32_t>(id));
  }
  std::vector<uint32_t> order{0};  // breadth-first; new_id[old] = position in order
  std::vector<uint32_t> new_id(children.size(), 0);
  for (size_t i = 0; i < order.size(); ++i) {
    for (const auto& [byte, child] : children[order[i]]) {
      new_id[child] = static_cast<uint32_t>(order.size());
      order.push_back(child);
    }
  }
  nodes_.resize(order.size());
  for (size_t i = 0; i < order.size(); ++i) {
    const uint32_t old = order[i];
    Node& n = nodes_[i];
    n.first_edge = static_cast<uint32_t>(edge_byte_.size());
    n.edge_count = static_cast<uint32_t>(children[old].size());
    for (const auto& [byte, child] : children[old]) {
      edge_byte_.push_back(byte);
      edge_node_.push_back(new_id[child]);
    }
    n.first_token = static_cast<uint32_t>(tokens_.size());
    n.token_count = static_cast<uint32_t>(ending[old].size());
    tokens_.insert(tokens_.end(), ending[old].begin(), ending[old].end());
  }
}

GrammarIndex::GrammarIndex(const Grammar& grammar, std::vector<std::string> token_bytes,
                           std::vector<uint8_t> end_of_sequence)
    : automaton_(grammar),
      token_bytes_(std::move(token_bytes)),
      end_of_sequence_(std::move(end_of_sequence)),
      trie_(token_bytes_, end_of_sequence_),
      initial_(automaton_.initial_state()) {}

bool GrammarIndex::accepting(int32_t state) {
  std::lock_guard<std::mutex> lock(mutex_);
  return automaton_.accepting(state);
}

int32_t GrammarIndex::advance(int32_t state, int32_t id) {
  std::lock_guard<std::mutex> lock(mutex_);
  const std::string& bytes = token_bytes_[static_cast<size_t>(id)];
  if (bytes.empty() || end_of_sequence_[static_cast<size_t>(id)] != 0)
    return GrammarAutomaton::kDead;
  return automaton_.step_bytes(state, bytes);
}

size_t GrammarIndex::automaton_states() {
  std::lock_guard<std::mutex> lock(mutex_);
  return automaton_.state_count();
}

const std::vector<uint64_t>& GrammarIndex::mask_locked(int32_t state) {
  const auto found = masks_.find(state);
  if (found != masks_.end()) return found->second;
  if (masks_.size() >= kMaxCachedMasks) masks_.clear();
  std::vector<uint64_t> bits((token_bytes_.size() + 63) / 64, 0);
  if (state != GrammarAutomaton::kDead) {
    trie_.walk(automaton_, state,
               [&](int32_t id) { bits[static_cast<size_t>(id) / 64] |= uint64_t{1} << (id % 64); });
    if (automaton_.accepting(state)) {
      for (size_t id = 0; id < end_of_sequence_.size(); ++id) {
        if (end_of_sequence_[id] != 0) bits[id / 64] |= uint64_t{1} << (id % 64);
      }
    }
  }
  return masks_.emplace(state, std::move(bits)).first->second;
}

size_t GrammarIndex::mask_logits(int32_t state, bool finished, std::span<float> logits) {
  std::lock_guard<std::mutex> lock(mutex_);
  size_t finite = 0;
  if (finished) {
    for (size_t id = 0; id < logits.size(); ++id) {
      if (end_of_sequence_[id] == 0) logits[id] = -INFINITY;
      finite += std::isfinite(logits[id]) ? 1 : 0;
    }
    return finite;
  }
  const std::vector<uint64_t>& bits = mask_locked(state);
  for (size_t word = 0; word < bits.size(); ++word) {
    const size_t begin = word * 64;
    const size_t end = std::min(begin + 64, logits.size());
    const uint64_t w = bits[word];
    if (w == ~uint64_t{0} && end - begin == 64) {
      for (size_t id = begin; id < end; ++id) finite += std::isfinite(logits[id]) ? 1 : 0;
      continue;
    }
    for (size_t id = begin; id < end; ++id) {
      if (((w >> (id - begin)) & 1u) == 0) {
        logits[id] = -INFINITY;
      } else {
        finite += std::isfinite(logits[id]) ? 1 : 0;
      }
    }
  }
  return finite;
}

std::vector<int32_t> GrammarIndex::allowed(int32_t state) {
  std::lock_guard<std::mutex> lock(mutex_);
  const std::vector<uint64_t>& bits = mask_locked(state);
  std::vector<int32_t> ids;
  for (size_t id = 0; id < token_bytes_.size(); ++id) {
    if ((bits[id / 64] >> (id % 64)) & 1u) ids.push_back(static_cast<int32_t>(id));
  }
  return ids;
}

}  // namespace sampler_grammar
