// Epoch orders of examples (epoch_order.hpp).
#include "train/epoch_order.hpp"

#include <algorithm>

#include "data/split.hpp"

namespace patchbay::train {

std::vector<int64_t> shuffled_indices(int64_t n, uint64_t state) {
  std::vector<int64_t> order(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) order[static_cast<size_t>(i)] = i;
  for (int64_t i = n - 1; i > 0; --i) {
    state = data::splitmix64(state);
    std::swap(order[static_cast<size_t>(i)],
              order[static_cast<size_t>(state % static_cast<uint64_t>(i + 1))]);
  }
  return order;
}

std::vector<int64_t> length_grouped_order(std::vector<int64_t> order,
                                          const std::vector<int64_t>& lengths, int64_t megabatch) {
  const auto longer = [&](int64_t a, int64_t b) {
    return lengths[static_cast<size_t>(a)] > lengths[static_cast<size_t>(b)];
  };
  for (size_t begin = 0; begin < order.size(); begin += static_cast<size_t>(megabatch)) {
    const size_t end = std::min(order.size(), begin + static_cast<size_t>(megabatch));
    std::stable_sort(order.begin() + static_cast<std::ptrdiff_t>(begin),
                     order.begin() + static_cast<std::ptrdiff_t>(end), longer);
  }
  return order;
}

}  // namespace patchbay::train
