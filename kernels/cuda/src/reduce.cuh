// Warp and block reductions shared by the .cu files of kernels/cuda (private to the library).
// Every reduction has a fixed order for a given block size (shuffle trees, then warp 0 over
// the warps' partials), so results are bit-reproducible run to run: no atomics on floats.
#pragma once

#include <cuda_runtime.h>

#include "patchbay/kernels/cuda/math/online_softmax.hpp"
#include "patchbay/kernels/cuda/math/welford.hpp"

namespace patchbay::kernels::cuda::detail {

constexpr unsigned kFullMask = 0xffffffffu;

__device__ __forceinline__ float warp_sum(float value) {
  for (int offset = 16; offset > 0; offset /= 2) value += __shfl_xor_sync(kFullMask, value, offset);
  return value;
}

__device__ __forceinline__ float warp_max(float value) {
  for (int offset = 16; offset > 0; offset /= 2)
    value = fmaxf(value, __shfl_xor_sync(kFullMask, value, offset));
  return value;
}

__device__ __forceinline__ math::WelfordState<float> warp_welford(math::WelfordState<float> s) {
  for (int offset = 16; offset > 0; offset /= 2) {
    math::WelfordState<float> other;
    other.count = __shfl_xor_sync(kFullMask, s.count, offset);
    other.mean = __shfl_xor_sync(kFullMask, s.mean, offset);
    other.m2 = __shfl_xor_sync(kFullMask, s.m2, offset);
    s = math::welford_merge(s, other);
  }
  return s;
}

__device__ __forceinline__ math::SoftmaxState<float> warp_softmax(math::SoftmaxState<float> s) {
  for (int offset = 16; offset > 0; offset /= 2) {
    math::SoftmaxState<float> other;
    other.max = __shfl_xor_sync(kFullMask, s.max, offset);
    other.sum = __shfl_xor_sync(kFullMask, s.sum, offset);
    s = math::softmax_merge(s, other);
  }
  return s;
}

// Sum over the block (blockDim.x a multiple of 32, at most 1024); every thread gets the result.
// `scratch`: 32 floats of shared memory; the call synchronises the block (all threads must call).
__device__ __forceinline__ float block_sum(float value, float* scratch) {
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32, warps = blockDim.x / 32;
  value = warp_sum(value);
  __syncthreads();  // scratch may still be read by a previous call
  if (lane == 0) scratch[warp] = value;
  __syncthreads();
  value = lane < warps ? scratch[lane] : 0.0f;
  return warp_sum(value);
}

// The online-softmax state of the block; same rules as block_sum (`scratch`: 64 floats).
__device__ __forceinline__ math::SoftmaxState<float> block_softmax(math::SoftmaxState<float> s,
                                                                   float* scratch) {
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32, warps = blockDim.x / 32;
  s = warp_softmax(s);
  __syncthreads();
  if (lane == 0) {
    scratch[warp] = s.max;
    scratch[32 + warp] = s.sum;
  }
  __syncthreads();
  math::SoftmaxState<float> partial;
  if (lane < warps) {
    partial.max = scratch[lane];
    partial.sum = scratch[32 + lane];
  }
  return warp_softmax(partial);
}

}  // namespace patchbay::kernels::cuda::detail
