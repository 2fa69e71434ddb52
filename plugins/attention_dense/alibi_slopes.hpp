// ALiBi head slopes (Press, Smith & Lewis 2022, "Train Short, Test Long"): head h of n adds
// -m_h * (i - j) to the score of query position i and key position j. For n a power of two
// the slopes are the geometric sequence m_h = 2^(-8(h+1)/n), h = 0..n-1 (n = 8: 1/2 .. 1/256).
// Otherwise, as in the paper's reference code: the 2^floor(log2 n) slopes of the closest
// smaller power of two, followed by every other slope (the 1st, 3rd, ...) of the sequence
// for twice that power, until there are n.
#pragma once

#include <cstdint>
#include <vector>

namespace patchbay_dense {

// n_heads >= 1; throws std::invalid_argument otherwise.
std::vector<double> alibi_slopes(int64_t n_heads);

}  // namespace patchbay_dense
