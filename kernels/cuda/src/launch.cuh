// Launch helpers shared by the .cu files of kernels/cuda (private to the library).
#pragma once

#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>

namespace patchbay::kernels::cuda::detail {

// Blocks for a grid-stride loop over `count` items at `threads` per block: enough to fill an
// H100/H200 (132 SMs x 16 blocks of 128..256 threads) and never more than there is work.
inline unsigned grid_stride_blocks(int64_t count, int threads) {
  const int64_t needed = (count + threads - 1) / threads;
  return static_cast<unsigned>(std::clamp<int64_t>(needed, 1, 132 * 16));
}

}  // namespace patchbay::kernels::cuda::detail
