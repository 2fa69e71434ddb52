// PATCHBAY_HD marks the device-independent math of kernels/cuda (bf16 rounding, Philox,
// GELU, Welford, online softmax, optimizer updates) as callable from host and device code.
// Under nvcc it expands to __host__ __device__ __forceinline__; under a host compiler (g++ in CI,
// where nvcc may be absent) to plain inline, so the same functions are tested on the CPU.
#pragma once

#if defined(__CUDACC__)
#define PATCHBAY_HD __host__ __device__ __forceinline__
#else
#define PATCHBAY_HD inline
#endif
