// Cumulative sum (cumsum.hpp): one thread per (outer, inner) line walking `length` elements in
// order with a double accumulator; consecutive threads take consecutive inner positions, so
// the loads coalesce when inner is large (a sum along a leading dimension) and stride by
// `length` when inner is 1 (along the last dimension: rows of tokens, short in practice).
#include "launch.cuh"
#include "patchbay/kernels/cuda/cumsum.hpp"

namespace patchbay::kernels::cuda {
namespace {

constexpr int kThreads = 256;

__global__ void cumsum_kernel(const float* x, float* out, int64_t outer, int64_t length,
                              int64_t inner, bool reverse) {
  const int64_t lines = outer * inner;
  const int64_t stride = int64_t(gridDim.x) * blockDim.x;
  for (int64_t line = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; line < lines;
       line += stride) {
    const int64_t o = line / inner, i = line % inner;
    const int64_t base = o * length * inner + i;
    double sum = 0.0;
    for (int64_t step = 0; step < length; ++step) {
      const int64_t l = reverse ? length - 1 - step : step;
      sum += x[base + l * inner];
      out[base + l * inner] = static_cast<float>(sum);
    }
  }
}

}  // namespace

cudaError_t cumsum_f32(const float* x, float* out, int64_t outer, int64_t length, int64_t inner,
                       bool reverse, cudaStream_t stream) {
  const int64_t lines = outer * inner;
  if (lines <= 0 || length <= 0) return cudaSuccess;
  cumsum_kernel<<<detail::grid_stride_blocks(lines, kThreads), kThreads, 0, stream>>>(
      x, out, outer, length, inner, reverse);
  return cudaGetLastError();
}

}  // namespace patchbay::kernels::cuda
