// CPU twins of random_reduce_rows.hpp (the same Philox draws; sums in double).
#pragma once

#include <cstdint>

#include "patchbay/kernels/cuda/row_reduction.hpp"

namespace patchbay::kernels::cuda {

void random_uniform_f32_reference(float* out, int64_t count, uint64_t seed, uint64_t offset,
                                  float low, float high);
void random_normal_f32_reference(float* out, int64_t count, uint64_t seed, uint64_t offset,
                                 float mean, float stddev);
void dropout_mask_f32_reference(float* mask, int64_t count, float p, uint64_t seed,
                                uint64_t offset);
void reduce_rows_f32_reference(RowReduction reduction, const float* in, float* out, int64_t rows,
                               int64_t cols);

}  // namespace patchbay::kernels::cuda
