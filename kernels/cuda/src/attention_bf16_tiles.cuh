// Shared pieces of the bf16 tensor-core flash attention kernels (attention_bf16_forward.cu,
// attention_bf16_backward.cu; private to the library). Blocks of 4 warps own kFlashRows = 64
// rows (16 per warp); the other operand streams through shared memory in tiles of kFlashTile =
// 64 rows. Products run on tensor cores through nvcuda::wmma (16x16x16, bf16 operands, f32
// accumulators); the per-element softmax work runs on CUDA cores from an f32 copy of the
// scores in shared memory (a wmma accumulator's element-to-row map is unspecified, so rows
// are never read from fragments), with each warp's lanes split two per row: lane / 2 = row,
// lane % 2 = parity, the lane taking columns parity, parity + 2, ... (interleaved: with the
// rows' 4-float padding, the 32 lanes' accesses fall in 2-way bank conflicts at worst, against
// 4-way for contiguous halves). The forward's row sums add each lane's columns in order, then
// the two lanes' partial sums (the twin sums the same way).
// Shared-memory rows are padded (bf16 rows by 8 elements, f32 rows by 4) against bank
// conflicts; every fragment pointer stays 32-byte aligned (wmma's requirement) because each
// warp's 16-row slice and each 16-column offset is a multiple of 32 bytes.
#pragma once

#include <cuda_bf16.h>
#include <cuda_runtime.h>
#include <mma.h>

#include <cstdint>
#include <initializer_list>

#include "patchbay/kernels/cuda/math/flash_bf16.hpp"
#include "patchbay/kernels/cuda/math/segments.hpp"

namespace patchbay::kernels::cuda::detail::flash {

using math::kFlashRows;
using math::kFlashTile;
using math::kFlashWarpRows;
namespace wmma = nvcuda::wmma;
using bf16 = __nv_bfloat16;

constexpr int kWarps = kFlashRows / kFlashWarpRows;  // 4
constexpr int kThreads = kWarps * 32;                // 128
constexpr int kScoreLd = kFlashTile + 4;             // f32 [16][64] score slices
constexpr int kProbLd = kFlashTile + 8;              // bf16 [16][64] P / dS slices

template <int D>
struct Dims {
  static constexpr int kLd = D + 8;     // bf16 [64][D] operand tiles
  static constexpr int kOutLd = D + 4;  // f32 [16][D] output accumulator slices
  static constexpr int kTileElems = kFlashRows * kLd;
};

using FragA = wmma::fragment<wmma::matrix_a, 16, 16, 16, bf16, wmma::row_major>;
using FragBT = wmma::fragment<wmma::matrix_b, 16, 16, 16, bf16, wmma::col_major>;  // rows^T
using FragB = wmma::fragment<wmma::matrix_b, 16, 16, 16, bf16, wmma::row_major>;
using FragC = wmma::fragment<wmma::accumulator, 16, 16, 16, float>;

// Carves the dynamic shared memory into 128-byte aligned pieces.
class SharedCarver {
 public:
  __device__ explicit SharedCarver(unsigned char* base) : base_(base) {}
  template <class T>
  __device__ T* take(int count) {
    T* piece = reinterpret_cast<T*>(base_ + used_);
    used_ += (count * int(sizeof(T)) + 127) / 128 * 128;
    return piece;
  }

 private:
  unsigned char* base_;
  int used_ = 0;
};
constexpr int carved_bytes(int bytes) { return (bytes + 127) / 128 * 128; }

// Rows [first, first + 64) of a [steps][D] bf16 matrix into a padded tile; zeros past the end.
// 16-byte loads (the host entry checks the operands' alignment; a row is D * 2 bytes).
template <int D>
__device__ __forceinline__ void load_rows(bf16* tile, const uint16_t* matrix, int64_t first,
                                          int64_t steps) {
  constexpr int kChunks = D / 8;
  for (int index = threadIdx.x; index < kFlashRows * kChunks; index += kThreads) {
    const int r = index / kChunks, c = index % kChunks;
    uint4 value = make_uint4(0u, 0u, 0u, 0u);
    if (first + r < steps)
      value = *reinterpret_cast<const uint4*>(matrix + (first + r) * D + c * 8);
    *reinterpret_cast<uint4*>(tile + r * Dims<D>::kLd + c * 8) = value;
  }
}

// s[16][64] (f32, ld kScoreLd) = a[16][D] * b[64][D]^T, both padded bf16 tiles. Depth outer
// with the 4 column blocks inner (4 accumulators live): each A fragment is read from shared
// memory once per product instead of once per column block. kFewRegisters keeps one
// accumulator live instead (the dK/dV kernel, whose dK and dV accumulators already hold 128
// registers at D = 128: it reached 254 of 255 registers depth-outer).
template <int D, bool kFewRegisters = false>
__device__ __forceinline__ void product_rows_by_rows_t(const bf16* a, const bf16* b, float* s) {
  constexpr int kLd = Dims<D>::kLd;
  constexpr int kBlocks = kFlashTile / 16;
  if constexpr (kFewRegisters) {
#pragma unroll
    for (int n = 0; n < kBlocks; ++n) {
      FragC acc;
      wmma::fill_fragment(acc, 0.0f);
#pragma unroll
      for (int kk = 0; kk < D / 16; ++kk) {
        FragA fa;
        FragBT fb;
        wmma::load_matrix_sync(fa, a + kk * 16, kLd);
        wmma::load_matrix_sync(fb, b + n * 16 * kLd + kk * 16, kLd);
        wmma::mma_sync(acc, fa, fb, acc);
      }
      wmma::store_matrix_sync(s + n * 16, acc, kScoreLd, wmma::mem_row_major);
    }
  } else {
    FragC acc[kBlocks];
#pragma unroll
    for (int n = 0; n < kBlocks; ++n) wmma::fill_fragment(acc[n], 0.0f);
#pragma unroll
    for (int kk = 0; kk < D / 16; ++kk) {
      FragA fa;
      wmma::load_matrix_sync(fa, a + kk * 16, kLd);
#pragma unroll
      for (int n = 0; n < kBlocks; ++n) {
        FragBT fb;
        wmma::load_matrix_sync(fb, b + n * 16 * kLd + kk * 16, kLd);
        wmma::mma_sync(acc[n], fa, fb, acc[n]);
      }
    }
#pragma unroll
    for (int n = 0; n < kBlocks; ++n)
      wmma::store_matrix_sync(s + n * 16, acc[n], kScoreLd, wmma::mem_row_major);
  }
}

// acc[n] += p[16][64] (bf16, ld kProbLd) * b[64][D] columns n*16.. (a padded bf16 tile).
template <int D>
__device__ __forceinline__ void accumulate_probs_by_rows(FragC (&acc)[D / 16], const bf16* p,
                                                         const bf16* b) {
  constexpr int kLd = Dims<D>::kLd;
  // Not unrolled: with D / 16 accumulators live (two sets in the dK/dV kernel), hoisted
  // operand loads of the next depth step made the D = 128 dK/dV kernel spill.
#pragma unroll 1
  for (int kk = 0; kk < kFlashTile / 16; ++kk) {
    FragA fa;
    wmma::load_matrix_sync(fa, p + kk * 16, kProbLd);
#pragma unroll
    for (int n = 0; n < D / 16; ++n) {
      FragB fb;
      wmma::load_matrix_sync(fb, b + kk * 16 * kLd + n * 16, kLd);
      wmma::mma_sync(acc[n], fa, fb, acc[n]);
    }
  }
}

// Writes a warp's [16][D] accumulator, times `factor`, to rows first.. of a [steps][D] f32
// matrix (rows >= steps skipped), through `staging` (a [16][kScoreLd] f32 slice of the warp).
template <int D>
__device__ __forceinline__ void store_rows(const FragC (&acc)[D / 16], float* staging,
                                           float* matrix, int64_t first, int64_t steps,
                                           float factor) {
  const int lane = threadIdx.x % 32;
#pragma unroll
  for (int n = 0; n < D / 16; ++n) {
    __syncwarp();
    wmma::store_matrix_sync(staging, acc[n], kScoreLd, wmma::mem_row_major);
    __syncwarp();
#pragma unroll
    for (int i = 0; i < 8; ++i) {
      const int e = lane + 32 * i, r = e / 16, c = e % 16;
      if (first + r < steps)
        matrix[(first + r) * D + n * 16 + c] = staging[r * kScoreLd + c] * factor;
    }
  }
}

__device__ __forceinline__ bf16 to_bf16(float value) {
  return __ushort_as_bfloat16(math::bf16_from_float(value));
}

// The segment row of this block's batch entry (blockIdx.y = b * heads + h), or nullptr.
__device__ __forceinline__ const int32_t* segment_row(const int32_t* segments, int64_t heads,
                                                      int64_t steps) {
  return segments == nullptr ? nullptr : segments + (int64_t(blockIdx.y) / heads) * steps;
}

// Causal blocks do unequal work (query block i visits i + 1 key tiles): the forward and dQ
// grids take the heaviest query blocks first.
__device__ __forceinline__ int64_t heaviest_first_block() {
  return int64_t(gridDim.x) - 1 - int64_t(blockIdx.x);
}

}  // namespace patchbay::kernels::cuda::detail::flash

namespace patchbay::kernels::cuda::detail {

// The host entries' checks: head dim 64 or 128, heads dividing batch_heads, batch_heads within
// the grid's y limit, and 16-byte aligned bf16 operands (the tiles' vector loads).
inline cudaError_t flash_bf16_check(int64_t batch_heads, int64_t head_dim, int64_t heads,
                                    std::initializer_list<const void*> operands) {
  if (head_dim != 64 && head_dim != 128) return cudaErrorInvalidValue;
  if (heads <= 0 || batch_heads % heads != 0 || batch_heads > 65535) return cudaErrorInvalidValue;
  for (const void* operand : operands)
    if (reinterpret_cast<uintptr_t>(operand) % 16 != 0) return cudaErrorMisalignedAddress;
  return cudaSuccess;
}

}  // namespace patchbay::kernels::cuda::detail
