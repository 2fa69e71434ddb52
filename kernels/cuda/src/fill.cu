// Device fills (fill.hpp): grid-stride loops, one element per thread per iteration.
#include "launch.cuh"
#include "patchbay/kernels/cuda/fill.hpp"

namespace patchbay::kernels::cuda {
namespace {

template <class T>
__global__ void fill_kernel(T* data, int64_t count, T value) {
  const int64_t stride = int64_t(gridDim.x) * blockDim.x;
  for (int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; i < count; i += stride) {
    data[i] = value;
  }
}

template <class T>
cudaError_t launch_fill(T* data, int64_t count, T value, cudaStream_t stream) {
  if (count <= 0) return cudaSuccess;
  constexpr int threads = 256;
  fill_kernel<<<detail::grid_stride_blocks(count, threads), threads, 0, stream>>>(data, count,
                                                                                  value);
  return cudaGetLastError();
}

}  // namespace

cudaError_t fill_f32(float* data, int64_t count, float value, cudaStream_t stream) {
  return launch_fill(data, count, value, stream);
}

cudaError_t fill_u16(uint16_t* data, int64_t count, uint16_t bits, cudaStream_t stream) {
  return launch_fill(data, count, bits, stream);
}

}  // namespace patchbay::kernels::cuda
