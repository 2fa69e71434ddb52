// Sort, argsort and top-k along the last dimension of a contiguous f32 tensor viewed as
// [rows, length], plus the backward pass both share.
//
// Ordering: NaN compares larger than every number (+inf included), as in PyTorch, so it
// comes last ascending and first descending. Sorting is stable: equal values keep their
// original order in either direction. Top-k is ordered the same way, and among equal values
// the lower index comes first, so results do not depend on the thread count or on the
// selection algorithm.
// Indices are int64_t positions along the last dimension.
// Backward: values_out[r, j] = values[r, indices[r, j]], so
//   grad_values[r, indices[r, j]] = grad_out[r, j], and 0 where nothing was selected
// (sort selects everything, top-k selects k per row).
// Thread safety: pure functions; threads split rows; outputs must not alias inputs.
#pragma once

#include <cstdint>

namespace patchbay::kernels {

enum class SortOrder { kAscending, kDescending };

// sorted_values (nullable, for argsort) and sorted_indices: [rows, length], overwritten.
void sort_last_dim(const float* values, int64_t rows, int64_t length, SortOrder order,
                   float* sorted_values, int64_t* sorted_indices);

// top_values (nullable) and top_indices: [rows, k], overwritten, 0 ≤ k ≤ length.
// largest = true: the k largest in descending order; false: the k smallest, ascending.
void topk_last_dim(const float* values, int64_t rows, int64_t length, int64_t k, bool largest,
                   float* top_values, int64_t* top_indices);

// grad_values [rows, length] (overwritten) from grad_selected / indices [rows, k], where
// the indices in a row are distinct (true for sort and top-k outputs).
void selection_backward_last_dim(const float* grad_selected, const int64_t* indices, int64_t rows,
                                 int64_t length, int64_t k, float* grad_values);

// Plain references: insertion sort (stable by construction) and top-k by k rounds of
// picking the best remaining element (first occurrence wins ties).
void sort_last_dim_reference(const float* values, int64_t rows, int64_t length, SortOrder order,
                             float* sorted_values, int64_t* sorted_indices);
void topk_last_dim_reference(const float* values, int64_t rows, int64_t length, int64_t k,
                             bool largest, float* top_values, int64_t* top_indices);

}  // namespace patchbay::kernels
