// Learning BPE merges from pre-token frequencies.
//
// Input: each distinct pre-token (a byte string) with how often it occurs. Output: merges
// in the order learned; merge r joins (left, right) into id 256 + r.
//
// Each step merges the adjacent pair with the highest total count (summed over every
// occurrence in every pre-token, weighted by the pre-token's frequency). Ties go to the
// smallest (left id, right id), compared as numbers — deterministic and independent of
// hash-map order. Training stops after `max_merges` merges or when the best pair occurs
// fewer than `min_pair_count` (>= 2) times, since a merge seen once only memorises.
//
// Incremental algorithm: pair counts live in a hash map; a max-heap holds (count, pair)
// snapshots and is invalidated lazily (a popped entry whose count differs from the map's
// is dropped; every count change pushes a fresh entry). Each pair keeps the list of word
// indices it occurs in, so a merge rewrites only those words: their old pairs are
// subtracted and their new pairs added. Cost per merge ~ the words containing the pair.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

namespace patchbay_bpe {

struct WordCount {
  std::string bytes;
  int64_t count = 0;
};

struct Merge {
  int32_t left = 0;
  int32_t right = 0;
};

std::vector<Merge> learn_merges(const std::vector<WordCount>& words, size_t max_merges,
                                int64_t min_pair_count = 2);

}  // namespace patchbay_bpe
