// Sort / top-k kernels and references (see sort_topk.hpp). Each row sorts a vector of
// positions with a comparator on the values: std::stable_sort for sort, and for top-k
// std::nth_element then std::sort of the k winners with (value, position) as a strict
// total order, which gives the same answer as a stable full sort but costs O(length + k log
// k). Threads split rows.
#include "patchbay/kernels/sort_topk.hpp"

#include <algorithm>
#include <cmath>
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

void write_row(const float* row, const std::vector<int64_t>& order, int64_t count,
               float* values_out, int64_t* indices_out) {
  for (int64_t j = 0; j < count; ++j) {
    const int64_t position = order[static_cast<size_t>(j)];
    indices_out[j] = position;
    if (values_out != nullptr) values_out[j] = row[position];
  }
}

}  // namespace

void sort_last_dim(const float* values, int64_t rows, int64_t length, SortOrder order,
                   float* sorted_values, int64_t* sorted_indices) {
  const bool descending = order == SortOrder::kDescending;
#pragma omp parallel if (worth_threads(rows, length))
  {
    std::vector<int64_t> positions(static_cast<size_t>(length));
#pragma omp for schedule(dynamic, 4)
    for (int64_t r = 0; r < rows; ++r) {
      const float* row = values + r * length;
      std::iota(positions.begin(), positions.end(), int64_t{0});
      std::stable_sort(positions.begin(), positions.end(), [&](int64_t a, int64_t b) {
        return comes_before(row[a], row[b], descending);
      });
      write_row(row, positions, length,
                sorted_values == nullptr ? nullptr : sorted_values + r * length,
                sorted_indices + r * length);
    }
  }
}

void topk_last_dim(const float* values, int64_t rows, int64_t length, int64_t k, bool largest,
                   float* top_values, int64_t* top_indices) {
  if (k == 0) return;
#pragma omp parallel if (worth_threads(rows, length))
  {
    std::vector<int64_t> positions(static_cast<size_t>(length));
#pragma omp for schedule(dynamic, 4)
    for (int64_t r = 0; r < rows; ++r) {
      const float* row = values + r * length;
      // Strict total order: by value in the requested direction, then lower position first.
      const auto better = [&](int64_t a, int64_t b) {
        if (comes_before(row[a], row[b], largest)) return true;
        if (comes_before(row[b], row[a], largest)) return false;
        return a < b;
      };
      std::iota(positions.begin(), positions.end(), int64_t{0});
      if (k < length) std::nth_element(positions.begin(), positions.begin() + k, positions.end(), better);
      std::sort(positions.begin(), positions.begin() + k, better);
      write_row(row, positions, k, top_values == nullptr ? nullptr : top_values + r * k,
                top_indices + r * k);
    }
  }
}

void selection_backward_last_dim(const float* grad_selected, const int64_t* indices,
                                 int64_t rows, int64_t length, int64_t k, float* grad_values) {
#pragma omp parallel for schedule(static) if (worth_threads(rows, length))
  for (int64_t r = 0; r < rows; ++r) {
    float* row = grad_values + r * length;
    std::fill(row, row + length, 0.0f);
    for (int64_t j = 0; j < k; ++j) row[indices[r * k + j]] = grad_selected[r * k + j];
  }
}

void sort_last_dim_reference(const float* values, int64_t rows, int64_t length,
                             SortOrder order, float* sorted_values, int64_t* sorted_indices) {
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
