// Incremental BPE training with a lazily invalidated max-heap; see bpe_trainer.hpp.
#include "bpe_trainer.hpp"

#include <algorithm>
#include <queue>
#include <unordered_map>

#include "bpe_merge.hpp"

namespace patchbay_bpe {
namespace {

struct HeapEntry {
  int64_t count;
  uint64_t pair;
  // "Less" for std::priority_queue (a max-heap): higher count wins, then smaller pair.
  bool operator<(const HeapEntry& o) const {
    return count != o.count ? count < o.count : pair > o.pair;
  }
};

struct TrainingState {
  std::vector<std::vector<int32_t>> word_ids;  // current tokens of each distinct word
  std::vector<int64_t> word_count;
  std::unordered_map<uint64_t, int64_t> pair_count;
  std::unordered_map<uint64_t, std::vector<uint32_t>> pair_words;  // may hold stale entries
  std::priority_queue<HeapEntry> heap;
};

void add_word_pairs(TrainingState& state, uint32_t word, int64_t sign,
                    std::unordered_map<uint64_t, int64_t>& delta) {
  const std::vector<int32_t>& ids = state.word_ids[word];
  for (size_t i = 0; i + 1 < ids.size(); ++i) {
    delta[pack_pair(static_cast<uint32_t>(ids[i]), static_cast<uint32_t>(ids[i + 1]))] +=
        sign * state.word_count[word];
  }
}

// Rewrites `ids`, replacing each non-overlapping (left, right) occurrence, scanning left
// to right, by `merged`. Returns false if the word holds no occurrence (stale index entry).
bool merge_in_word(std::vector<int32_t>& ids, int32_t left, int32_t right, int32_t merged) {
  size_t write = 0;
  bool changed = false;
  for (size_t read = 0; read < ids.size();) {
    if (read + 1 < ids.size() && ids[read] == left && ids[read + 1] == right) {
      ids[write++] = merged;
      read += 2;
      changed = true;
    } else {
      ids[write++] = ids[read++];
    }
  }
  ids.resize(write);
  return changed;
}

}  // namespace

std::vector<Merge> learn_merges(const std::vector<WordCount>& words, size_t max_merges,
                                int64_t min_pair_count) {
  min_pair_count = std::max<int64_t>(min_pair_count, 2);
  TrainingState state;
  state.word_ids.reserve(words.size());
  for (const WordCount& word : words) {
    std::vector<int32_t> ids;
    ids.reserve(word.bytes.size());
    for (unsigned char c : word.bytes) ids.push_back(c);
    state.word_ids.push_back(std::move(ids));
    state.word_count.push_back(word.count);
  }
  {
    std::unordered_map<uint64_t, int64_t> initial;
    for (uint32_t w = 0; w < state.word_ids.size(); ++w) {
      add_word_pairs(state, w, +1, initial);
      const std::vector<int32_t>& ids = state.word_ids[w];
      for (size_t i = 0; i + 1 < ids.size(); ++i) {
        std::vector<uint32_t>& list = state.pair_words[pack_pair(
            static_cast<uint32_t>(ids[i]), static_cast<uint32_t>(ids[i + 1]))];
        if (list.empty() || list.back() != w) list.push_back(w);
      }
    }
    state.pair_count = std::move(initial);
    for (const auto& [pair, count] : state.pair_count) state.heap.push(HeapEntry{count, pair});
  }

  std::vector<Merge> merges;
  std::vector<uint32_t> seen_stamp(state.word_ids.size(), UINT32_MAX);
  std::unordered_map<uint64_t, int64_t> delta;
  while (merges.size() < max_merges && !state.heap.empty()) {
    const HeapEntry top = state.heap.top();
    state.heap.pop();
    auto found = state.pair_count.find(top.pair);
    if (found == state.pair_count.end() || found->second != top.count) continue;  // stale
    if (top.count < min_pair_count) break;

    const auto left = static_cast<int32_t>(top.pair >> 32);
    const auto right = static_cast<int32_t>(top.pair & 0xffffffffu);
    const auto merged = static_cast<int32_t>(256 + merges.size());
    const auto stamp = static_cast<uint32_t>(merges.size());
    merges.push_back(Merge{left, right});

    delta.clear();
    std::vector<uint32_t> affected = std::move(state.pair_words[top.pair]);
    state.pair_words.erase(top.pair);
    std::vector<uint32_t> changed_words;
    for (uint32_t w : affected) {
      if (seen_stamp[w] == stamp) continue;
      seen_stamp[w] = stamp;
      std::vector<int32_t> before = state.word_ids[w];
      if (!merge_in_word(state.word_ids[w], left, right, merged)) continue;
      std::swap(before, state.word_ids[w]);
      add_word_pairs(state, w, -1, delta);
      std::swap(before, state.word_ids[w]);
      add_word_pairs(state, w, +1, delta);
      changed_words.push_back(w);
    }
    // Index the changed words under their new pairs (those holding the merged id; the
    // others were indexed already).
    for (uint32_t w : changed_words) {
      const std::vector<int32_t>& ids = state.word_ids[w];
      for (size_t i = 0; i + 1 < ids.size(); ++i) {
        if (ids[i] != merged && ids[i + 1] != merged) continue;
        std::vector<uint32_t>& list = state.pair_words[pack_pair(
            static_cast<uint32_t>(ids[i]), static_cast<uint32_t>(ids[i + 1]))];
        if (list.empty() || list.back() != w) list.push_back(w);
      }
    }
    for (const auto& [pair, change] : delta) {
      if (change == 0) continue;
      int64_t& count = state.pair_count[pair];
      count += change;
      if (count <= 0) {
        state.pair_count.erase(pair);
      } else {
        state.heap.push(HeapEntry{count, pair});
      }
    }
  }
  return merges;
}

}  // namespace patchbay_bpe
