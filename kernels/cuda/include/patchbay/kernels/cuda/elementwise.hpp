// Element-wise CUDA kernels on f32 (and the f32 <-> bf16 conversions of mixed precision).
// Host functions on device pointers: they enqueue on `stream` and return the launch status.
// Outputs may alias inputs of the same shape (in place). CPU twins: elementwise_reference.hpp.
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>

namespace patchbay::kernels::cuda {

// out[i] = a[i] + b[i]
cudaError_t add_f32(const float* a, const float* b, float* out, int64_t count, cudaStream_t stream);
// out[i] = a[i] * b[i]
cudaError_t multiply_f32(const float* a, const float* b, float* out, int64_t count,
                         cudaStream_t stream);
// y[i] = alpha * x[i] + beta * y[i] (beta = 0 never reads y, so y may hold NaN)
cudaError_t axpby_f32(float alpha, const float* x, float beta, float* y, int64_t count,
                      cudaStream_t stream);
// bf16 patterns, round to nearest even (math/bf16.hpp); NaN stays NaN.
cudaError_t convert_f32_to_bf16(const float* in, uint16_t* out, int64_t count, cudaStream_t stream);
cudaError_t convert_bf16_to_f32(const uint16_t* in, float* out, int64_t count, cudaStream_t stream);

}  // namespace patchbay::kernels::cuda
