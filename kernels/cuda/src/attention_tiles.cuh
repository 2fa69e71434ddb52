// Shared pieces of the flash attention kernels (attention_forward.cu, attention_backward.cu;
// private to the library). Work split: a group of G = D/32 threads owns one row (query row in
// the forward and dQ kernels, key row in the dK/dV kernel); thread `part` of the group holds
// dims part + G*i, i < 32 (interleaved, so the group's shared-memory reads hit distinct banks),
// and dot products are summed across the group with log2(G) shuffles. A block holds
// kRows = 64 rows; the other operand streams through shared memory in tiles of kTile = 32 rows.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

#include "patchbay/kernels/cuda/math/segments.hpp"
#include "reduce.cuh"

namespace patchbay::kernels::cuda::detail {

constexpr int kRows = 64;
constexpr int kTile = 32;
constexpr int kDimsPerThread = 32;

template <int G>
__device__ __forceinline__ float group_sum(float value) {
#pragma unroll
  for (int offset = 1; offset < G; offset *= 2) value += __shfl_xor_sync(kFullMask, value, offset);
  return value;
}

// Loads rows [first, first + kTile) of a [steps x D] matrix into tile (zeros past the end).
template <int D>
__device__ __forceinline__ void load_tile(float (*tile)[D], const float* matrix, int64_t first,
                                          int64_t steps) {
  for (int index = threadIdx.x; index < kTile * D; index += blockDim.x) {
    const int r = index / D, d = index % D;
    tile[r][d] = first + r < steps ? matrix[(first + r) * D + d] : 0.0f;
  }
}

// The first key of `row`'s segment (0 without segments); blockIdx.y = b * heads + h.
__device__ __forceinline__ int64_t segment_first_key(const int32_t* segments, int64_t heads,
                                                     int64_t steps, int64_t row, bool active) {
  if (segments == nullptr || !active) return 0;
  return math::segment_begin(segments + (int64_t(blockIdx.y) / heads) * steps, row);
}
// One past the last query of `key`'s segment (steps without segments).
__device__ __forceinline__ int64_t segment_query_end(const int32_t* segments, int64_t heads,
                                                     int64_t steps, int64_t key, bool active) {
  if (segments == nullptr || !active) return steps;
  return math::segment_end(segments + (int64_t(blockIdx.y) / heads) * steps, steps, key);
}

inline dim3 row_grid(int64_t batch_heads, int64_t steps) {
  return dim3(static_cast<unsigned>((steps + kRows - 1) / kRows),
              static_cast<unsigned>(batch_heads));
}

}  // namespace patchbay::kernels::cuda::detail
