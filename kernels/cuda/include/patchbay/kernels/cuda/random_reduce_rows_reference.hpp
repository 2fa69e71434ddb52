// CPU twins of random_reduce_rows.hpp (the same Philox blocks; sums in double).
#pragma once

#include <cstdint>

#include "patchbay/kernels/cuda/row_reduction.hpp"

namespace patchbay::kernels::cuda {

void random_fill_f32_reference(float* out, int64_t count, uint64_t first_block, uint64_t seed,
                               bool normal, double low, double high);
void dropout_mask_f32_reference(const float* u, double p, float* keep, int64_t count);
void reduce_rows_f32_reference(RowReduction reduction, const float* in, float* out, int64_t* argmax,
                               int64_t rows, int64_t cols);
void max_rows_backward_f32_reference(const float* dy, const int64_t* argmax, float* dx,
                                     int64_t rows, int64_t cols);

}  // namespace patchbay::kernels::cuda
