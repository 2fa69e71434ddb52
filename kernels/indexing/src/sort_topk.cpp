// Sort / top-k kernels and references (see sort_topk.hpp).
//
// Each element becomes one uint64 key: an order-preserving 32-bit image of its value in
// the high half (complemented for descending order, every NaN mapped past +inf, -0 folded
// onto +0 so the two compare equal) and its position in the low half. Integer order on the
// keys is exactly "by value in the requested direction, ties by lower position", which is
// the stable order; so sort is std::sort on contiguous integers (no indirect comparator,
// no merge buffer) and top-k is std::nth_element + std::sort of the k winners (or one pass
// with a k-element heap when k is small next to the row).
// Positions must fit 32 bits: rows are far shorter than 2^32 elements in practice and the
// kernels fall back to an indirect std::stable_sort beyond that.
// Threads split rows.
#include "patchbay/kernels/sort_topk.hpp"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <numeric>
#include <vector>

namespace patchbay::kernels {
namespace {

// a < b with NaN larger than everything (NaN vs NaN: not less, so NaNs stay stable).
bool less_nan_last(float a, float b) {
  if (std::isnan(a)) return false;
  if (std::isnan(b)) return true;
  return a < b;
}

// True when `a` should come before `b` in the requested order (a strict weak ordering).
bool comes_before(float a, float b, bool descending) {
  return descending ? less_nan_last(b, a) : less_nan_last(a, b);
}

bool worth_threads(int64_t rows, int64_t length) { return rows > 1 && rows * length > 4096; }

constexpr int64_t kMaxPackedLength = int64_t{1} << 32;

// 32-bit image of v whose unsigned order is less_nan_last's order (ascending), or its
// reverse when descending.
uint32_t order_bits(float v, bool descending) {
  uint32_t key;
  if (std::isnan(v)) {
    key = std::numeric_limits<uint32_t>::max();
  } else {
    if (v == 0.0f) v = 0.0f;  // -0 == +0
    uint32_t bits;
    std::memcpy(&bits, &v, sizeof bits);
    key = (bits & 0x80000000u) ? ~bits : (bits | 0x80000000u);
  }
  return descending ? ~key : key;
}

// keys[j] = (order_bits(row[j]) << 32) | j.
void pack_keys(const float* row, int64_t length, bool descending, std::vector<uint64_t>& keys) {
  keys.resize(static_cast<size_t>(length));
  for (int64_t j = 0; j < length; ++j)
    keys[static_cast<size_t>(j)] =
        (uint64_t{order_bits(row[j], descending)} << 32) | static_cast<uint64_t>(j);
}

void write_row(const float* row, const std::vector<int64_t>& order, int64_t count,
               float* values_out, int64_t* indices_out) {
  for (int64_t j = 0; j < count; ++j) {
    const int64_t position = order[static_cast<size_t>(j)];
    indices_out[j] = position;
    if (values_out != nullptr) values_out[j] = row[position];
  }
}

// For k much smaller than the row (top-k sampling: k ~ 50 of a 50k vocabulary) one pass
// with a max-heap of the k best keys so far beats nth_element over all packed keys: most
// elements cost one comparison against the heap's worst key.
constexpr int64_t kSmallKRatio = 16;

// keys[0, k) = the k smallest keys of the row, ascending.
void smallest_keys_by_heap(const float* row, int64_t length, int64_t k, bool descending,
                           std::vector<uint64_t>& keys) {
  keys.clear();
  for (int64_t j = 0; j < length; ++j) {
    const uint64_t key =
        (uint64_t{order_bits(row[j], descending)} << 32) | static_cast<uint64_t>(j);
    if (static_cast<int64_t>(keys.size()) < k) {
      keys.push_back(key);
      std::push_heap(keys.begin(), keys.end());
    } else if (key < keys.front()) {
      std::pop_heap(keys.begin(), keys.end());
      keys.back() = key;
      std::push_heap(keys.begin(), keys.end());
    }
  }
  std::sort_heap(keys.begin(), keys.end());
}

// Positions are the low 32 bits of the keys.
void write_keys(const float* row, const std::vector<uint64_t>& keys, int64_t count,
                float* values_out, int64_t* indices_out) {
  for (int64_t j = 0; j < count; ++j) {
    const auto position = static_cast<int64_t>(keys[static_cast<size_t>(j)] & 0xffffffffu);
    indices_out[j] = position;
    if (values_out != nullptr) values_out[j] = row[position];
  }
}

// The first `count` positions of `row` in stable order, by an indirect stable sort (only
// for rows too long to pack).
void stable_sort_row_indirect(const float* row, int64_t length, int64_t count, bool descending,
                              float* values_out, int64_t* indices_out) {
  std::vector<int64_t> positions(static_cast<size_t>(length));
  std::iota(positions.begin(), positions.end(), int64_t{0});
  std::stable_sort(positions.begin(), positions.end(),
                   [&](int64_t a, int64_t b) { return comes_before(row[a], row[b], descending); });
  write_row(row, positions, count, values_out, indices_out);
}

}  // namespace

void sort_last_dim(const float* values, int64_t rows, int64_t length, SortOrder order,
                   float* sorted_values, int64_t* sorted_indices) {
  const bool descending = order == SortOrder::kDescending;
#pragma omp parallel if (worth_threads(rows, length))
  {
    std::vector<uint64_t> keys;
#pragma omp for schedule(dynamic, 4)
    for (int64_t r = 0; r < rows; ++r) {
      const float* row = values + r * length;
      float* values_out = sorted_values == nullptr ? nullptr : sorted_values + r * length;
      if (length >= kMaxPackedLength) {
        stable_sort_row_indirect(row, length, length, descending, values_out,
                                 sorted_indices + r * length);
        continue;
      }
      pack_keys(row, length, descending, keys);
      std::sort(keys.begin(), keys.end());
      write_keys(row, keys, length, values_out, sorted_indices + r * length);
    }
  }
}

void topk_last_dim(const float* values, int64_t rows, int64_t length, int64_t k, bool largest,
                   float* top_values, int64_t* top_indices) {
  if (k == 0) return;
#pragma omp parallel if (worth_threads(rows, length))
  {
    std::vector<uint64_t> keys;
#pragma omp for schedule(dynamic, 4)
    for (int64_t r = 0; r < rows; ++r) {
      const float* row = values + r * length;
      float* values_out = top_values == nullptr ? nullptr : top_values + r * k;
      if (length >= kMaxPackedLength) {
        stable_sort_row_indirect(row, length, k, largest, values_out, top_indices + r * k);
        continue;
      }
      // largest: descending keys, so the k smallest keys are the k largest values.
      if (k * kSmallKRatio <= length) {
        smallest_keys_by_heap(row, length, k, largest, keys);
      } else {
        pack_keys(row, length, largest, keys);
        if (k < length) std::nth_element(keys.begin(), keys.begin() + k, keys.end());
        std::sort(keys.begin(), keys.begin() + k);
      }
      write_keys(row, keys, k, values_out, top_indices + r * k);
    }
  }
}

void selection_backward_last_dim(const float* grad_selected, const int64_t* indices, int64_t rows,
                                 int64_t length, int64_t k, float* grad_values) {
#pragma omp parallel for schedule(static) if (worth_threads(rows, length))
  for (int64_t r = 0; r < rows; ++r) {
    float* row = grad_values + r * length;
    std::fill(row, row + length, 0.0f);
    for (int64_t j = 0; j < k; ++j) row[indices[r * k + j]] = grad_selected[r * k + j];
  }
}

void sort_last_dim_reference(const float* values, int64_t rows, int64_t length, SortOrder order,
                             float* sorted_values, int64_t* sorted_indices) {
  const bool descending = order == SortOrder::kDescending;
  for (int64_t r = 0; r < rows; ++r) {
    const float* row = values + r * length;
    std::vector<int64_t> positions;
    // Insert each element after every element it does not come before: stable.
    for (int64_t j = 0; j < length; ++j) {
      auto at = positions.end();
      while (at != positions.begin() && comes_before(row[j], row[*(at - 1)], descending)) --at;
      positions.insert(at, j);
    }
    write_row(row, positions, length,
              sorted_values == nullptr ? nullptr : sorted_values + r * length,
              sorted_indices + r * length);
  }
}

void topk_last_dim_reference(const float* values, int64_t rows, int64_t length, int64_t k,
                             bool largest, float* top_values, int64_t* top_indices) {
  for (int64_t r = 0; r < rows; ++r) {
    const float* row = values + r * length;
    std::vector<bool> taken(static_cast<size_t>(length), false);
    std::vector<int64_t> picked;
    for (int64_t round = 0; round < k; ++round) {
      int64_t best = -1;
      for (int64_t j = 0; j < length; ++j) {
        if (taken[static_cast<size_t>(j)]) continue;
        if (best < 0 || comes_before(row[j], row[best], largest)) best = j;
      }
      taken[static_cast<size_t>(best)] = true;
      picked.push_back(best);
    }
    write_row(row, picked, k, top_values == nullptr ? nullptr : top_values + r * k,
              top_indices + r * k);
  }
}

}  // namespace patchbay::kernels
