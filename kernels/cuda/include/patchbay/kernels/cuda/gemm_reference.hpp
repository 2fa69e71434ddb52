// CPU twin of gemm.hpp: row-major products in double on f32 arrays (bf16 operands are passed
// as their f32 values, already rounded), then the same epilogue. One batch item per call.
#pragma once

#include <cstdint>

#include "patchbay/kernels/cuda/gemm_types.hpp"

namespace patchbay::kernels::cuda {

// d: [m x n] f32 (read when beta != 0); bias, aux, bias_gradient as in GemmArguments (f32).
void gemm_reference(int64_t m, int64_t n, int64_t k, bool transpose_a, bool transpose_b,
                    const float* a, const float* b, float* d, float alpha, float beta,
                    GemmEpilogue epilogue, const float* bias, float* aux, float* bias_gradient);

}  // namespace patchbay::kernels::cuda
