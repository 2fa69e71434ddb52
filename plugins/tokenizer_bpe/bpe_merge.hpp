// Applying learned merges to one pre-token.
//
// Ids: in Patchbay's own format 0..255 are the raw bytes and merge number r (its rank, 0 =
// learned first) creates id 256 + r. A published vocabulary (GPT-2 files, tokenizer.json)
// keeps its own ids: byte b starts as byte_id(b) and merge r creates the id of the
// concatenated token. A piece is encoded by starting from its byte ids and repeatedly
// merging the adjacent pair with the lowest rank (leftmost on ties) until no adjacent pair
// has a rank. That is GPT-2's rule (encoder.py merges the lowest-rank bigram first) and
// Hugging Face's (Word::merge_all pops the lowest (rank, position)).
//
// PairRankTable maps a pair (left id, right id), packed as left << 32 | right, to its rank
// and the id it creates, with open addressing (linear probing, power-of-two capacity, load
// <= 1/2): one multiply and usually one cache line per lookup, which is what encode spends
// its time on. The result id sits in what was the slot's padding, so a slot stays 16 bytes.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string_view>
#include <vector>

namespace patchbay_bpe {

constexpr uint32_t kNoRank = UINT32_MAX;
// find() packs (rank << 32) | result id, so comparing packed values compares ranks (ranks
// are distinct within a table); kNoMerge compares above every real entry.
constexpr uint64_t kNoMerge = UINT64_MAX;

inline uint32_t rank_of_packed(uint64_t packed) { return static_cast<uint32_t>(packed >> 32); }
inline int32_t result_of_packed(uint64_t packed) { return static_cast<int32_t>(packed & 0xffffffffu); }

inline uint64_t pack_pair(uint32_t left, uint32_t right) {
  return (static_cast<uint64_t>(left) << 32) | right;
}

class PairRankTable {
 public:
  void clear();
  void reserve(size_t count);
  PairRankTable();
  // Inserts or overwrites (a later duplicate pair wins, as in GPT-2's and HF's dicts).
  // Without `result` the merge creates id 256 + rank (Patchbay's own format).
  void insert(uint64_t pair, uint32_t rank) { insert(pair, rank, static_cast<int32_t>(256 + rank)); }
  void insert(uint64_t pair, uint32_t rank, int32_t result);
  // (rank << 32) | result id, or kNoMerge.
  uint64_t find_packed(uint64_t pair) const {
    if (slots_.empty()) return kNoMerge;
    size_t i = slot_of(pair);
    while (true) {
      const Slot& slot = slots_[i];
      if (slot.key == pair) return (static_cast<uint64_t>(slot.rank) << 32) | static_cast<uint32_t>(slot.result);
      if (slot.key == kEmptyKey) return kNoMerge;
      i = (i + 1) & mask_;
    }
  }
  uint32_t find(uint64_t pair) const {
    const uint64_t packed = find_packed(pair);
    return packed == kNoMerge ? kNoRank : rank_of_packed(packed);
  }
  size_t size() const { return size_; }
  // The id each byte starts as (identity unless set; clear() keeps it).
  int32_t byte_id(unsigned char b) const { return byte_ids_[b]; }
  void set_byte_ids(const int32_t (&ids)[256]);
  void set_identity_byte_ids();

 private:
  struct Slot {
    uint64_t key;
    uint32_t rank;
    int32_t result;
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
  int32_t byte_ids_[256];
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
