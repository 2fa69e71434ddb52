// Embedding and rotary kernels (embedding_rotary.hpp).
// Forward gather: one block per token, threads across the row (coalesced).
// Backward: grid (dim / 128 column chunks) x (kVocabSlices vocabulary slices); each block
// scans every id in token order (ids staged in shared memory) and, for the ids in its slice,
// adds the token's gradient columns into dweight. One thread owns one (column, slice), so each
// dweight element is summed by exactly one thread in token order: deterministic, no atomics.
// Each block reads all ids (count * 4-8 bytes, from L2) but only its slice's gradient rows.
// Rotary: one thread per (row-step, pair), cos/sin from sincos in double of the same angle
// the CPU tabulates.
#include <cmath>

#include "launch.cuh"
#include "patchbay/kernels/cuda/embedding_rotary.hpp"

namespace patchbay::kernels::cuda {
namespace {

constexpr int kColumns = 128;
constexpr int kVocabSlices = 64;
constexpr int kIdTile = 1024;

template <class Index>
__global__ void embedding_forward_kernel(const Index* ids, const float* weight, float* out,
                                         int64_t vocab, int64_t dim) {
  const int64_t token = blockIdx.x;
  const Index id = ids[token];
  const bool valid = id >= 0 && int64_t(id) < vocab;
  for (int64_t c = threadIdx.x; c < dim; c += blockDim.x)
    out[token * dim + c] = valid ? weight[int64_t(id) * dim + c] : NAN;
}

template <class Index>
__global__ void embedding_backward_kernel(const Index* ids, const float* dout, float* dweight,
                                          int64_t count, int64_t vocab, int64_t dim) {
  __shared__ Index tile[kIdTile];
  const int64_t column = int64_t(blockIdx.x) * kColumns + threadIdx.x;
  const int64_t slice = (vocab + kVocabSlices - 1) / kVocabSlices;
  const int64_t first_id = int64_t(blockIdx.y) * slice;
  const int64_t end_id = first_id + slice < vocab ? first_id + slice : vocab;
  for (int64_t base = 0; base < count; base += kIdTile) {
    const int64_t tile_count = count - base < kIdTile ? count - base : kIdTile;
    __syncthreads();  // the previous tile is consumed
    for (int64_t i = threadIdx.x; i < tile_count; i += blockDim.x) tile[i] = ids[base + i];
    __syncthreads();
    if (column >= dim) continue;
    for (int64_t i = 0; i < tile_count; ++i) {
      const int64_t id = tile[i];
      if (id >= first_id && id < end_id)
        dweight[id * dim + column] += dout[(base + i) * dim + column];
    }
  }
}

__global__ void rotary_kernel(const float* x, float* out, int64_t rows_steps, int64_t steps,
                              int64_t dim, int64_t position_offset, double theta, bool inverse) {
  const int64_t half = dim / 2;
  const int64_t total = rows_steps * half;
  const int64_t stride = int64_t(gridDim.x) * blockDim.x;
  for (int64_t p = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; p < total; p += stride) {
    const int64_t row_step = p / half, i = p % half;
    const double position = double(position_offset + row_step % steps);
    const double angle = position * pow(theta, -2.0 * double(i) / double(dim));
    const float c = static_cast<float>(cos(angle));
    const float s = static_cast<float>(inverse ? -sin(angle) : sin(angle));
    const float* in = x + row_step * dim;
    const float x1 = in[i], x2 = in[i + half];
    out[row_step * dim + i] = x1 * c - x2 * s;
    out[row_step * dim + i + half] = x2 * c + x1 * s;
  }
}

template <class Index>
cudaError_t launch_forward(const Index* ids, const float* weight, float* out, int64_t count,
                           int64_t vocab, int64_t dim, cudaStream_t stream) {
  if (count <= 0 || dim <= 0) return cudaSuccess;
  embedding_forward_kernel<<<static_cast<unsigned>(count), 256, 0, stream>>>(ids, weight, out,
                                                                             vocab, dim);
  return cudaGetLastError();
}

template <class Index>
cudaError_t launch_backward(const Index* ids, const float* dout, float* dweight, int64_t count,
                            int64_t vocab, int64_t dim, cudaStream_t stream) {
  if (count <= 0 || dim <= 0 || vocab <= 0) return cudaSuccess;
  const dim3 grid(static_cast<unsigned>((dim + kColumns - 1) / kColumns), kVocabSlices);
  embedding_backward_kernel<<<grid, kColumns, 0, stream>>>(ids, dout, dweight, count, vocab, dim);
  return cudaGetLastError();
}

}  // namespace

cudaError_t embedding_forward(const int32_t* ids, const float* weight, float* out, int64_t count,
                              int64_t vocab, int64_t dim, cudaStream_t stream) {
  return launch_forward(ids, weight, out, count, vocab, dim, stream);
}
cudaError_t embedding_forward(const int64_t* ids, const float* weight, float* out, int64_t count,
                              int64_t vocab, int64_t dim, cudaStream_t stream) {
  return launch_forward(ids, weight, out, count, vocab, dim, stream);
}
cudaError_t embedding_backward(const int32_t* ids, const float* dout, float* dweight, int64_t count,
                               int64_t vocab, int64_t dim, cudaStream_t stream) {
  return launch_backward(ids, dout, dweight, count, vocab, dim, stream);
}
cudaError_t embedding_backward(const int64_t* ids, const float* dout, float* dweight, int64_t count,
                               int64_t vocab, int64_t dim, cudaStream_t stream) {
  return launch_backward(ids, dout, dweight, count, vocab, dim, stream);
}

cudaError_t rotary_embedding(const float* x, float* out, int64_t rows, int64_t steps, int64_t dim,
                             int64_t position_offset, double theta, bool inverse,
                             cudaStream_t stream) {
  const int64_t pairs = rows * steps * (dim / 2);
  if (pairs <= 0) return cudaSuccess;
  rotary_kernel<<<detail::grid_stride_blocks(pairs, 256), 256, 0, stream>>>(
      x, out, rows * steps, steps, dim, position_offset, theta, inverse);
  return cudaGetLastError();
}

}  // namespace patchbay::kernels::cuda
