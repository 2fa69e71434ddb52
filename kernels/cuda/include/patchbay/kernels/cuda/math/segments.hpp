// Packed-sequence segments for the CUDA attention kernels: a row of segment ids [Tk] is
// non-decreasing (each segment one contiguous run; the engine op checks it), so the keys a
// query at position pos may see (seg[j] == seg[pos]) form one span [segment_begin,
// segment_end), found by binary search. The kernels intersect their causal / window span with
// it instead of testing every (query, key) pair. Written once for the kernels and the CPU test.
#pragma once

#include <cstdint>

#include "patchbay/kernels/cuda/math/host_device.hpp"

namespace patchbay::kernels::cuda::math {

// The first position j <= pos with seg[j] == seg[pos].
PATCHBAY_HD int64_t segment_begin(const int32_t* seg, int64_t pos) {
  const int32_t id = seg[pos];
  int64_t lo = 0, hi = pos;  // answer in [lo, hi]
  while (lo < hi) {
    const int64_t mid = lo + (hi - lo) / 2;
    if (seg[mid] < id)
      lo = mid + 1;
    else
      hi = mid;
  }
  return lo;
}

// One past the last position j >= pos with seg[j] == seg[pos] (length = the row's size).
PATCHBAY_HD int64_t segment_end(const int32_t* seg, int64_t length, int64_t pos) {
  const int32_t id = seg[pos];
  int64_t lo = pos + 1, hi = length;  // answer in [lo, hi]
  while (lo < hi) {
    const int64_t mid = lo + (hi - lo) / 2;
    if (seg[mid] > id)
      hi = mid;
    else
      lo = mid + 1;
  }
  return lo;
}

}  // namespace patchbay::kernels::cuda::math
