// Applying learned merges to one pre-token.
//
// Ids: 0..255 are the raw bytes; merge number r (its rank, 0 = learned first) creates id
// 256 + r. A piece is encoded by starting from its bytes and repeatedly merging the
// adjacent pair with the lowest rank (leftmost on ties) until no adjacent pair has a rank.
// That is GPT-2's rule (encoder.py merges the lowest-rank bigram first).
//
// PairRankTable maps a pair (left id, right id), packed as left << 32 | right, to its rank
// with open addressing (linear probing, power-of-two capacity, load <= 1/2): one multiply
// and usually one cache line per lookup, which is what encode spends its time on.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string_view>
#include <vector>

namespace patchbay_bpe {

constexpr uint32_t kNoRank = UINT32_MAX;

inline uint64_t pack_pair(uint32_t left, uint32_t right) {
  return (static_cast<uint64_t>(left) << 32) | right;
}

class PairRankTable {
 public:
  void clear();
  void reserve(size_t count);
  // Inserts or overwrites.
  void insert(uint64_t pair, uint32_t rank);
  uint32_t find(uint64_t pair) const {
    if (slots_.empty()) return kNoRank;
    size_t i = slot_of(pair);
    while (true) {
      const Slot& slot = slots_[i];
      if (slot.key == pair) return slot.rank;
      if (slot.key == kEmptyKey) return kNoRank;
      i = (i + 1) & mask_;
    }
  }
  size_t size() const { return size_; }

 private:
  struct Slot {
    uint64_t key;
    uint32_t rank;
  };
  static constexpr uint64_t kEmptyKey = UINT64_MAX;  // ids are < 2^31, so never a real pair
  size_t slot_of(uint64_t pair) const {
    return static_cast<size_t>((pair * 0x9E3779B97F4A7C15ull) >> shift_);
  }
  void rehash(size_t capacity);

  std::vector<Slot> slots_;
  size_t mask_ = 0;
  unsigned shift_ = 64;
  size_t size_ = 0;
};

// Appends the ids of `piece` to `out`. Picks the quadratic scan for short pieces and the
// heap for long ones (identical results; tests check both on the same inputs).
void merge_piece(std::string_view piece, const PairRankTable& ranks, std::vector<int32_t>& out);

// The two strategies, exposed for tests. Scan: O(n^2) worst case, fastest for the few-byte
// pieces of ordinary text. Heap: O(n log n), for pathological pieces ('x' * 10^6).
void merge_piece_scan(std::string_view piece, const PairRankTable& ranks,
                      std::vector<int32_t>& out);
void merge_piece_heap(std::string_view piece, const PairRankTable& ranks,
                      std::vector<int32_t>& out);

}  // namespace patchbay_bpe
