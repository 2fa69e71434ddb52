// Element-wise kernels (elementwise.hpp): grid-stride loops, one element per thread per step;
// memory-bound, so nothing fancier than coalesced access.
#include "launch.cuh"
#include "patchbay/kernels/cuda/elementwise.hpp"
#include "patchbay/kernels/cuda/math/bf16.hpp"

namespace patchbay::kernels::cuda {
namespace {

constexpr int kThreads = 256;

template <class Op>
__global__ void map_kernel(int64_t count, Op op) {
  const int64_t stride = int64_t(gridDim.x) * blockDim.x;
  for (int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; i < count; i += stride) op(i);
}

template <class Op>
cudaError_t launch_map(int64_t count, Op op, cudaStream_t stream) {
  if (count <= 0) return cudaSuccess;
  map_kernel<<<detail::grid_stride_blocks(count, kThreads), kThreads, 0, stream>>>(count, op);
  return cudaGetLastError();
}

struct Add {
  const float* a;
  const float* b;
  float* out;
  __device__ void operator()(int64_t i) const { out[i] = a[i] + b[i]; }
};
struct Multiply {
  const float* a;
  const float* b;
  float* out;
  __device__ void operator()(int64_t i) const { out[i] = a[i] * b[i]; }
};
struct Axpby {
  float alpha;
  const float* x;
  float beta;
  float* y;
  __device__ void operator()(int64_t i) const {
    y[i] = beta == 0.0f ? alpha * x[i] : alpha * x[i] + beta * y[i];
  }
};
struct ToBf16 {
  const float* in;
  uint16_t* out;
  __device__ void operator()(int64_t i) const { out[i] = math::bf16_from_float(in[i]); }
};
struct FromBf16 {
  const uint16_t* in;
  float* out;
  __device__ void operator()(int64_t i) const { out[i] = math::float_from_bf16(in[i]); }
};

}  // namespace

cudaError_t add_f32(const float* a, const float* b, float* out, int64_t count,
                    cudaStream_t stream) {
  return launch_map(count, Add{a, b, out}, stream);
}
cudaError_t multiply_f32(const float* a, const float* b, float* out, int64_t count,
                         cudaStream_t stream) {
  return launch_map(count, Multiply{a, b, out}, stream);
}
cudaError_t axpby_f32(float alpha, const float* x, float beta, float* y, int64_t count,
                      cudaStream_t stream) {
  return launch_map(count, Axpby{alpha, x, beta, y}, stream);
}
cudaError_t convert_f32_to_bf16(const float* in, uint16_t* out, int64_t count,
                                cudaStream_t stream) {
  return launch_map(count, ToBf16{in, out}, stream);
}
cudaError_t convert_bf16_to_f32(const uint16_t* in, float* out, int64_t count,
                                cudaStream_t stream) {
  return launch_map(count, FromBf16{in, out}, stream);
}

}  // namespace patchbay::kernels::cuda
