// Shapes and strides of the strided element-wise kernels (strided.hpp), apart so the CPU twin
// needs no CUDA headers. Strides are in elements and may be 0 (broadcast) or negative.
#pragma once

#include <cstdint>

namespace patchbay::kernels::cuda {

constexpr int kMaxStridedRank = 8;

// The iteration shape (the output's), row-major; rank 0 is a scalar (one element).
struct StridedShape {
  int rank = 0;
  int64_t sizes[kMaxStridedRank] = {};
};

// One operand's strides over the iteration shape.
struct Strides {
  int64_t values[kMaxStridedRank] = {};
};

enum class BinaryOp : int { kAdd, kSub, kMul, kDiv, kMaximum, kMinimum };

// Element type of a masked_fill mask: an element is "masked" when its value is not zero
// (so -0.0 is not masked, NaN is), as the engine reads masks of any dtype.
enum class MaskType : int { kU8, kI32, kI64, kF32, kBF16 };

inline int64_t element_count(const StridedShape& shape) {
  int64_t count = 1;
  for (int d = 0; d < shape.rank; ++d) count *= shape.sizes[d];
  return count;
}

// The offset of linear (row-major) element `index` of `shape` under `strides`. The loop runs
// over all kMaxStridedRank dimensions with a test, unrolled, so the indices into sizes and
// strides are constants: on the GPU the structs then stay in registers and parameter space
// instead of a 200-byte local-memory copy (measured with ptxas -v).
#if defined(__CUDACC__)
__host__ __device__
#endif
    inline int64_t
    strided_offset(const StridedShape& shape, const Strides& strides, int64_t index) {
  int64_t offset = 0;
#if defined(__CUDA_ARCH__)  // the device pass only (g++ would warn on the pragma)
#pragma unroll
#endif
  for (int d = kMaxStridedRank - 1; d >= 0; --d) {
    if (d < shape.rank) {
      const int64_t size = shape.sizes[d];
      offset += (index % size) * strides.values[d];
      index /= size;
    }
  }
  return offset;
}

}  // namespace patchbay::kernels::cuda
