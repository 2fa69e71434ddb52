// Cumulative sum along one dimension of a contiguous f32 tensor viewed as [outer, length,
// inner], forward or reverse (the reverse sum is also the forward's backward), accumulated in
// double as the CPU kernel does. CPU twin: cumsum_reference.hpp.
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>

namespace patchbay::kernels::cuda {

// out[o, l, i] = sum_{l' <= l} x[o, l', i] (reverse: l' >= l). out may alias x.
cudaError_t cumsum_f32(const float* x, float* out, int64_t outer, int64_t length, int64_t inner,
                       bool reverse, cudaStream_t stream);

}  // namespace patchbay::kernels::cuda
