// Device fills: the smallest kernels of kernels/cuda, used by the GPU tests to poison outputs
// with NaN before a kernel writes them (a kernel that skips an element then fails its test).
// Host functions on device pointers; they enqueue on `stream` and return the launch's status
// (cudaSuccess, or the error of the launch; asynchronous errors surface at the next sync).
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>

namespace patchbay::kernels::cuda {

// data[i] = value for i in [0, count). data: device memory, count elements.
cudaError_t fill_f32(float* data, int64_t count, float value, cudaStream_t stream);

// Fills `count` bf16 elements (raw 16-bit patterns) with `bits` (0x7FC0 is a quiet NaN).
cudaError_t fill_u16(uint16_t* data, int64_t count, uint16_t bits, cudaStream_t stream);

}  // namespace patchbay::kernels::cuda
