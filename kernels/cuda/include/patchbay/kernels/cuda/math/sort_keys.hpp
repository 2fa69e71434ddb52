// Sort keys and the bitonic network of the CUDA sort / top-k (indexing.hpp), written once for
// the kernels and their CPU twin (indexing_reference.hpp).
//
// Each element of a row becomes one uint64 key, as the CPU kernels build it
// (kernels/indexing/src/sort_topk.cpp): an order-preserving 32-bit image of its value in the
// high half (every NaN past +inf, -0 folded onto +0, complemented for descending order) and its
// position in the low half. Integer order on the keys is "by value in the requested direction,
// ties by lower position": the CPU's stable order, so any correct sorting network gives the
// CPU's result exactly. Rows are padded to a power of two with kPadKey (larger than every real
// key, since positions stay below 2^32 - 1).
// Bitonic network on P = 2^p keys: for k = 2, 4, ..., P and j = k/2, ..., 1, every pair
// (i, i + j) with (i & j) == 0 is put in ascending order when (i & k) == 0, else descending.
#pragma once

#include <cstdint>
#include <cstring>

#include "patchbay/kernels/cuda/math/host_device.hpp"

namespace patchbay::kernels::cuda::math {

constexpr uint64_t kPadKey = ~uint64_t{0};
// Rows must be shorter than this (a position fits the key's low half and is never all ones).
constexpr int64_t kMaxSortLength = (int64_t{1} << 32) - 1;

// 32-bit image of v whose unsigned order is ascending value order with NaN last (reversed when
// descending); -0 and +0 map to the same image.
PATCHBAY_HD uint32_t sort_order_bits(float v, bool descending) {
  uint32_t key;
  if (v != v) {
    key = 0xffffffffu;
  } else {
    if (v == 0.0f) v = 0.0f;  // -0 == +0
#if defined(__CUDA_ARCH__)
    const uint32_t bits = __float_as_uint(v);
#else
    uint32_t bits;
    std::memcpy(&bits, &v, sizeof bits);
#endif
    key = (bits & 0x80000000u) ? ~bits : (bits | 0x80000000u);
  }
  return descending ? ~key : key;
}

PATCHBAY_HD uint64_t sort_key(float v, int64_t position, bool descending) {
  return (uint64_t{sort_order_bits(v, descending)} << 32) | static_cast<uint64_t>(position);
}

PATCHBAY_HD int64_t sort_key_position(uint64_t key) {
  return static_cast<int64_t>(key & 0xffffffffu);
}

// The smallest power of two >= n (1 for n <= 1).
PATCHBAY_HD int64_t bitonic_padded_length(int64_t n) {
  int64_t p = 1;
  while (p < n) p <<= 1;
  return p;
}

// The lower element of compare-exchange pair number `pair` (0 <= pair < P/2) at distance j.
PATCHBAY_HD int64_t bitonic_pair_low(int64_t pair, int64_t j) {
  return 2 * j * (pair / j) + pair % j;
}

// The direction of stage k at a pair whose lower element sits at `position` of the row.
PATCHBAY_HD bool bitonic_ascending(int64_t position, int64_t k) { return (position & k) == 0; }

// Puts keys[low], keys[low + j] in the given order (keys may be a tile of the row: `low` is
// then the tile-local index and `ascending` was taken from the position in the row).
PATCHBAY_HD void bitonic_compare_exchange(uint64_t* keys, int64_t low, int64_t j, bool ascending) {
  const uint64_t a = keys[low], b = keys[low + j];
  if (a != b && (a > b) == ascending) {
    keys[low] = b;
    keys[low + j] = a;
  }
}

}  // namespace patchbay::kernels::cuda::math
