// Orders in which an objective reads its examples epoch by epoch, as pure functions of a seed
// (so a resume reads exactly the examples the straight run would have).
//   shuffled_indices(n, state)   a Fisher-Yates shuffle of 0..n-1 driven by splitmix64 from state
//   length_grouped_order(...)    the shuffle cut into megabatches of `megabatch` entries, each
//                                sorted by length, longest first (Hugging Face's
//                                LengthGroupedSampler): consecutive batches of a megabatch hold
//                                examples of similar length, so padding to the longest in a
//                                batch wastes little, while which examples meet stays random.
#pragma once

#include <cstdint>
#include <vector>

namespace patchbay::train {

std::vector<int64_t> shuffled_indices(int64_t n, uint64_t state);

// `order` (a shuffle of 0..n-1) regrouped as above; lengths[i] is example i's length (the
// padded cost of a row); ties keep the shuffled order. megabatch >= 1.
std::vector<int64_t> length_grouped_order(std::vector<int64_t> order,
                                          const std::vector<int64_t>& lengths, int64_t megabatch);

}  // namespace patchbay::train
