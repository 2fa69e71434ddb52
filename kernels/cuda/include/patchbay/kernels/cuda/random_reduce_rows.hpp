// Counter-based random fills and dropout (Philox4x32-10, math/philox.hpp: element i of stream
// `offset` under `seed` is the same number on every device and in the CPU twin, whatever the
// launch shape), and reductions along the last dimension (sum, mean, max per row).
// CPU twins: random_reduce_rows_reference.hpp.
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>

#include "patchbay/kernels/cuda/row_reduction.hpp"

namespace patchbay::kernels::cuda {

// out[i] = low + (high - low) * u_i, u_i uniform in [0, 1) from philox_draw(seed, offset, i).
cudaError_t random_uniform_f32(float* out, int64_t count, uint64_t seed, uint64_t offset, float low,
                               float high, cudaStream_t stream);
// out[i] = mean + stddev * z_i, z_i standard normal (Box-Muller on the draw's words 0 and 1).
cudaError_t random_normal_f32(float* out, int64_t count, uint64_t seed, uint64_t offset, float mean,
                              float stddev, cudaStream_t stream);
// Inverted dropout: mask[i] = u_i >= p ? 1 / (1 - p) : 0 (p in [0, 1); p = 0 keeps all), so
// y = x * mask keeps the expectation. u_i is the draw's word 2 (independent of the others).
cudaError_t dropout_mask_f32(float* mask, int64_t count, float p, uint64_t seed, uint64_t offset,
                             cudaStream_t stream);

// out[r] = reduce(in[r, 0..cols)), row-major [rows x cols]; one block per row, fixed order.
cudaError_t reduce_rows_f32(RowReduction reduction, const float* in, float* out, int64_t rows,
                            int64_t cols, cudaStream_t stream);

}  // namespace patchbay::kernels::cuda
