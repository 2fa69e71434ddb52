// Random fills in the engine's layout (math/philox.hpp, engine_random_block: Philox4x32-10,
// four values per counter block, so a GPU fill equals the CPU engine's `random` kernel's up to
// the last ulp of logf/cosf/sinf, whatever the launch shape: the same initial weights on both
// devices), the engine's dropout mask, and reductions along the last dimension.
// CPU twins: random_reduce_rows_reference.hpp.
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>

#include "patchbay/kernels/cuda/row_reduction.hpp"

namespace patchbay::kernels::cuda {

// out[0..count): values of counter blocks first_block, first_block + 1, ... under seed;
// normal: standard normal; else uniform [low, high).
cudaError_t random_fill_f32(float* out, int64_t count, uint64_t first_block, uint64_t seed,
                            bool normal, double low, double high, cudaStream_t stream);

// keep[i] = u[i] >= p ? 1 / (1 - p) : 0 (u: uniform draws), the engine's dropout_mask.
cudaError_t dropout_mask_f32(const float* u, double p, float* keep, int64_t count,
                             cudaStream_t stream);

// out[r] = reduce(in[r, 0..cols)), row-major [rows x cols]; one block per row, fixed order.
// Max follows the engine: the first maximal element wins, a NaN anywhere makes the row's max
// NaN (the first NaN's index); argmax [rows] is written when not null (kMax only).
cudaError_t reduce_rows_f32(RowReduction reduction, const float* in, float* out, int64_t* argmax,
                            int64_t rows, int64_t cols, cudaStream_t stream);

// The backward of a row max: dx [rows x cols] = 0 except dx[r, argmax[r]] = dy[r].
cudaError_t max_rows_backward_f32(const float* dy, const int64_t* argmax, float* dx, int64_t rows,
                                  int64_t cols, cudaStream_t stream);

}  // namespace patchbay::kernels::cuda
