// Rank table and the two per-piece merge strategies; see bpe_merge.hpp.
#include "bpe_merge.hpp"

#include <bit>
#include <queue>

namespace patchbay_bpe {
namespace {

// Pieces up to this many bytes use the scan; measured on KJV text, pieces average ~5
// bytes and the scan beats the heap well beyond that, so the threshold only guards
// against quadratic blow-up.
constexpr size_t kScanMaxBytes = 128;

inline uint32_t rank_of(const PairRankTable& ranks, int32_t left, int32_t right) {
  return ranks.find(pack_pair(static_cast<uint32_t>(left), static_cast<uint32_t>(right)));
}

inline uint64_t merge_of(const PairRankTable& ranks, int32_t left, int32_t right) {
  return ranks.find_packed(pack_pair(static_cast<uint32_t>(left), static_cast<uint32_t>(right)));
}

}  // namespace

PairRankTable::PairRankTable() { set_identity_byte_ids(); }

void PairRankTable::set_byte_ids(const int32_t (&ids)[256]) {
  for (int b = 0; b < 256; ++b) byte_ids_[b] = ids[b];
}

void PairRankTable::set_identity_byte_ids() {
  for (int b = 0; b < 256; ++b) byte_ids_[b] = b;
}

void PairRankTable::clear() {
  slots_.clear();
  mask_ = 0;
  shift_ = 64;
  size_ = 0;
}

void PairRankTable::reserve(size_t count) {
  size_t capacity = 16;
  while (capacity < count * 2) capacity *= 2;
  if (capacity > slots_.size()) rehash(capacity);
}

void PairRankTable::rehash(size_t capacity) {
  std::vector<Slot> old = std::move(slots_);
  slots_.assign(capacity, Slot{kEmptyKey, 0, 0});
  mask_ = capacity - 1;
  shift_ = 64 - static_cast<unsigned>(std::countr_zero(capacity));
  size_ = 0;
  for (const Slot& slot : old) {
    if (slot.key != kEmptyKey) insert(slot.key, slot.rank, slot.result);
  }
}

void PairRankTable::insert(uint64_t pair, uint32_t rank, int32_t result) {
  if ((size_ + 1) * 2 > slots_.size()) rehash(slots_.empty() ? 16 : slots_.size() * 2);
  size_t i = slot_of(pair);
  while (slots_[i].key != kEmptyKey && slots_[i].key != pair) i = (i + 1) & mask_;
  if (slots_[i].key == kEmptyKey) ++size_;
  slots_[i] = Slot{pair, rank, result};
}

void merge_piece(std::string_view piece, const PairRankTable& ranks, std::vector<int32_t>& out) {
  if (piece.size() <= kScanMaxBytes) {
    merge_piece_scan(piece, ranks, out);
  } else {
    merge_piece_heap(piece, ranks, out);
  }
}

void merge_piece_scan(std::string_view piece, const PairRankTable& ranks,
                      std::vector<int32_t>& out) {
  const size_t n = piece.size();
  if (n == 0) return;
  if (n == 1) {
    out.push_back(ranks.byte_id(static_cast<unsigned char>(piece[0])));
    return;
  }
  // ids[i] and pair_merge[i] = packed (rank, result) of (ids[i], ids[i+1]); both shrink by
  // one per merge. Packed values order by rank, so the minimum is the best merge.
  int32_t ids_buffer[kScanMaxBytes];
  uint64_t merge_buffer[kScanMaxBytes];
  std::vector<int32_t> ids_heap;
  std::vector<uint64_t> merge_heap;
  int32_t* ids = ids_buffer;
  uint64_t* pair_merge = merge_buffer;
  if (n > kScanMaxBytes) {
    ids_heap.resize(n);
    merge_heap.resize(n);
    ids = ids_heap.data();
    pair_merge = merge_heap.data();
  }
  for (size_t i = 0; i < n; ++i) ids[i] = ranks.byte_id(static_cast<unsigned char>(piece[i]));
  size_t count = n;
  for (size_t i = 0; i + 1 < count; ++i) pair_merge[i] = merge_of(ranks, ids[i], ids[i + 1]);
  while (count > 1) {
    uint64_t best = kNoMerge;
    size_t best_at = 0;
    for (size_t i = 0; i + 1 < count; ++i) {
      if (pair_merge[i] < best) {
        best = pair_merge[i];
        best_at = i;
      }
    }
    if (best == kNoMerge) break;
    ids[best_at] = result_of_packed(best);
    for (size_t i = best_at + 1; i + 1 < count; ++i) {
      ids[i] = ids[i + 1];
      pair_merge[i] = pair_merge[i + 1];
    }
    --count;
    if (best_at + 1 < count) pair_merge[best_at] = merge_of(ranks, ids[best_at], ids[best_at + 1]);
    if (best_at > 0) pair_merge[best_at - 1] = merge_of(ranks, ids[best_at - 1], ids[best_at]);
  }
  out.insert(out.end(), ids, ids + count);
}

void merge_piece_heap(std::string_view piece, const PairRankTable& ranks,
                      std::vector<int32_t>& out) {
  const size_t n = piece.size();
  if (n == 0) return;
  // A doubly linked list over byte positions; a merge keeps the left node and unlinks the
  // right one. Heap entries (rank, left position, right position) go stale when either node
  // changes; they are checked when popped (lazy invalidation).
  constexpr int64_t kNone = -1;
  std::vector<int32_t> ids(n);
  std::vector<int64_t> prev(n), next(n);
  std::vector<bool> alive(n, true);
  for (size_t i = 0; i < n; ++i) {
    ids[i] = ranks.byte_id(static_cast<unsigned char>(piece[i]));
    prev[i] = static_cast<int64_t>(i) - 1;
    next[i] = i + 1 < n ? static_cast<int64_t>(i + 1) : kNone;
  }
  struct Entry {
    uint32_t rank;
    int32_t result;
    int64_t left;
    int64_t right;
    bool operator>(const Entry& o) const {
      return rank != o.rank ? rank > o.rank : left > o.left;
    }
  };
  std::priority_queue<Entry, std::vector<Entry>, std::greater<Entry>> heap;
  auto push_pair = [&](int64_t left) {
    if (left == kNone || next[left] == kNone) return;
    const uint64_t merge = merge_of(ranks, ids[left], ids[next[left]]);
    if (merge != kNoMerge) heap.push(Entry{rank_of_packed(merge), result_of_packed(merge), left, next[left]});
  };
  for (size_t i = 0; i + 1 < n; ++i) push_pair(static_cast<int64_t>(i));
  while (!heap.empty()) {
    const Entry top = heap.top();
    heap.pop();
    if (!alive[top.left] || next[top.left] != top.right ||
        rank_of(ranks, ids[top.left], ids[top.right]) != top.rank) {
      continue;
    }
    ids[top.left] = top.result;
    alive[top.right] = false;
    next[top.left] = next[top.right];
    if (next[top.right] != kNone) prev[next[top.right]] = top.left;
    push_pair(prev[top.left]);
    push_pair(top.left);
  }
  for (int64_t i = 0; i != kNone; i = next[i]) out.push_back(ids[i]);
}

}  // namespace patchbay_bpe
