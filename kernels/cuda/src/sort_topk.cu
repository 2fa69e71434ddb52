// Stable sort / top-k along rows and the selection backward (indexing.hpp). Rows are packed
// into uint64 keys (math/sort_keys.hpp: value order, then position) padded to a power of two P
// and sorted by a bitonic network in a workspace of rows * P keys:
//   tile_sort:  one block per tile of T = min(P, 2048) keys, every stage k <= T in shared memory;
//   for each larger stage k: global passes for the distances j >= T, then tile_merge for the
//               distances j < T in shared memory (one launch per k);
//   unpack:     the first `count` keys of each row -> positions and values.
// Every key is distinct, so the result is the unique ascending order of the keys: the CPU's.
#include "launch.cuh"
#include "patchbay/kernels/cuda/fill.hpp"
#include "patchbay/kernels/cuda/indexing.hpp"
#include "patchbay/kernels/cuda/math/sort_keys.hpp"

namespace patchbay::kernels::cuda {
namespace {

namespace m = math;

constexpr int64_t kTileKeys = 2048;  // 16 KiB of shared memory per block
constexpr int kTileThreads = 512;
constexpr int kThreads = 256;

// The network's stages k that fit a tile (k <= tile) or the distances j < tile of stage k,
// on tile keys in shared memory; `base` is the tile's first position in the row.
__device__ void tile_network(uint64_t* tile, int64_t tile_keys, int64_t base, int64_t k_first,
                             int64_t k_last, bool merge_only) {
  for (int64_t k = k_first; k <= k_last; k <<= 1) {
    for (int64_t j = merge_only ? tile_keys >> 1 : k >> 1; j > 0; j >>= 1) {
      __syncthreads();
      for (int64_t pair = threadIdx.x; pair < tile_keys / 2; pair += blockDim.x) {
        const int64_t low = m::bitonic_pair_low(pair, j);
        m::bitonic_compare_exchange(tile, low, j, m::bitonic_ascending(base + low, k));
      }
    }
  }
  __syncthreads();
}

__global__ void tile_sort_kernel(const float* x, int64_t length, int64_t padded, int64_t tile_keys,
                                 bool descending, uint64_t* workspace) {
  extern __shared__ uint64_t tile[];
  const int64_t tiles_per_row = padded / tile_keys;
  const int64_t row = blockIdx.x / tiles_per_row;
  const int64_t base = (blockIdx.x % tiles_per_row) * tile_keys;
  for (int64_t t = threadIdx.x; t < tile_keys; t += blockDim.x) {
    const int64_t position = base + t;
    tile[t] = position < length ? m::sort_key(x[row * length + position], position, descending)
                                : m::kPadKey;
  }
  tile_network(tile, tile_keys, base, 2, tile_keys, false);
  for (int64_t t = threadIdx.x; t < tile_keys; t += blockDim.x)
    workspace[row * padded + base + t] = tile[t];
}

__global__ void tile_merge_kernel(int64_t padded, int64_t tile_keys, int64_t k,
                                  uint64_t* workspace) {
  extern __shared__ uint64_t tile[];
  const int64_t tiles_per_row = padded / tile_keys;
  const int64_t row = blockIdx.x / tiles_per_row;
  const int64_t base = (blockIdx.x % tiles_per_row) * tile_keys;
  uint64_t* keys = workspace + row * padded + base;
  for (int64_t t = threadIdx.x; t < tile_keys; t += blockDim.x) tile[t] = keys[t];
  tile_network(tile, tile_keys, base, k, k, true);
  for (int64_t t = threadIdx.x; t < tile_keys; t += blockDim.x) keys[t] = tile[t];
}

__global__ void global_pass_kernel(int64_t rows, int64_t padded, int64_t k, int64_t j,
                                   uint64_t* workspace) {
  const int64_t pairs_per_row = padded / 2, pairs = rows * pairs_per_row;
  const int64_t stride = int64_t(gridDim.x) * blockDim.x;
  for (int64_t pair = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; pair < pairs;
       pair += stride) {
    const int64_t row = pair / pairs_per_row;
    const int64_t low = m::bitonic_pair_low(pair % pairs_per_row, j);
    m::bitonic_compare_exchange(workspace + row * padded, low, j, m::bitonic_ascending(low, k));
  }
}

__global__ void unpack_kernel(const float* x, int64_t rows, int64_t length, int64_t padded,
                              int64_t count, const uint64_t* workspace, float* values,
                              int64_t* indices) {
  const int64_t total = rows * count;
  const int64_t stride = int64_t(gridDim.x) * blockDim.x;
  for (int64_t e = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; e < total; e += stride) {
    const int64_t row = e / count, column = e % count;
    const int64_t position = m::sort_key_position(workspace[row * padded + column]);
    indices[e] = position;
    if (values != nullptr) values[e] = x[row * length + position];
  }
}

__global__ void selection_backward_kernel(const float* grad_selected, const int64_t* indices,
                                          int64_t rows, int64_t length, int64_t k, float* grad_x) {
  const int64_t total = rows * k;
  const int64_t stride = int64_t(gridDim.x) * blockDim.x;
  for (int64_t e = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; e < total; e += stride) {
    const int64_t position = indices[e];
    if (position >= 0 && position < length) grad_x[(e / k) * length + position] = grad_selected[e];
  }
}

}  // namespace

int64_t sort_workspace_keys(int64_t rows, int64_t length) {
  return rows * m::bitonic_padded_length(length);
}

cudaError_t sort_rows_f32(const float* x, int64_t rows, int64_t length, int64_t count,
                          bool descending, float* values, int64_t* indices, uint64_t* workspace,
                          cudaStream_t stream) {
  if (length < 0 || length >= m::kMaxSortLength || count < 0 || count > length)
    return cudaErrorInvalidValue;
  if (rows <= 0 || count == 0) return cudaSuccess;
  const int64_t padded = m::bitonic_padded_length(length);
  const int64_t tile_keys = padded < kTileKeys ? padded : kTileKeys;
  const int64_t tiles = rows * (padded / tile_keys);
  if (tiles > 0x7fffffff) return cudaErrorInvalidValue;
  const int tile_threads = static_cast<int>(
      tile_keys / 2 < kTileThreads ? (tile_keys / 2 > 0 ? tile_keys / 2 : 1) : kTileThreads);
  const size_t tile_bytes = static_cast<size_t>(tile_keys) * sizeof(uint64_t);
  tile_sort_kernel<<<static_cast<unsigned>(tiles), tile_threads, tile_bytes, stream>>>(
      x, length, padded, tile_keys, descending, workspace);
  for (int64_t k = 2 * tile_keys; k <= padded; k <<= 1) {
    for (int64_t j = k >> 1; j >= tile_keys; j >>= 1)
      global_pass_kernel<<<detail::grid_stride_blocks(rows * padded / 2, kThreads), kThreads, 0,
                           stream>>>(rows, padded, k, j, workspace);
    tile_merge_kernel<<<static_cast<unsigned>(tiles), tile_threads, tile_bytes, stream>>>(
        padded, tile_keys, k, workspace);
  }
  unpack_kernel<<<detail::grid_stride_blocks(rows * count, kThreads), kThreads, 0, stream>>>(
      x, rows, length, padded, count, workspace, values, indices);
  return cudaGetLastError();
}

cudaError_t selection_backward_f32(const float* grad_selected, const int64_t* indices, int64_t rows,
                                   int64_t length, int64_t k, float* grad_x, cudaStream_t stream) {
  if (rows <= 0 || length <= 0) return cudaSuccess;
  if (const cudaError_t status = fill_f32(grad_x, rows * length, 0.0f, stream);
      status != cudaSuccess)
    return status;
  if (k <= 0) return cudaSuccess;
  selection_backward_kernel<<<detail::grid_stride_blocks(rows * k, kThreads), kThreads, 0,
                              stream>>>(grad_selected, indices, rows, length, k, grad_x);
  return cudaGetLastError();
}

}  // namespace patchbay::kernels::cuda
