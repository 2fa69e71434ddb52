// Causal linear attention (linear_attention.hpp): the chunked causal product, one block of
// kThreads per (row, 32-column slice of c) walking the chunks in order.
// Shared memory per block (floats): a_c, b_c [kChunk][Ea], state [Ea][kCols],
// c_c [kChunk][kCols], scores [kChunk][kChunk + 1].
// Per chunk: load -> scores = mask(A_c B_c^T) -> out = scores C_c + A_c S -> S += B_c^T C_c.
#include "launch.cuh"
#include "patchbay/kernels/cuda/linear_attention.hpp"

namespace patchbay::kernels::cuda {
namespace {

constexpr int kChunk = static_cast<int>(kLinearChunk);
constexpr int kCols = 32;
constexpr int kThreads = 256;
constexpr int64_t kMaxSharedBytes = 227 * 1024;

int64_t shared_floats(int64_t a_dim) {
  return 2 * kChunk * a_dim + a_dim * kCols + kChunk * kCols + kChunk * (kChunk + 1);
}

// Position of step t of the sweep (the reverse sweep runs from the end).
__device__ __forceinline__ int64_t position_of(int64_t t, int64_t length, bool reverse) {
  return reverse ? length - 1 - t : t;
}

__global__ void __launch_bounds__(kThreads)
    causal_product_kernel(const float* a, const float* b, const float* c, float* out,
                          int64_t length, int64_t a_dim, int64_t c_dim, bool reverse) {
  extern __shared__ float shared[];
  float* a_c = shared;                   // [kChunk][a_dim]
  float* b_c = a_c + kChunk * a_dim;     // [kChunk][a_dim]
  float* state = b_c + kChunk * a_dim;   // [a_dim][kCols]
  float* c_c = state + a_dim * kCols;    // [kChunk][kCols]
  float* scores = c_c + kChunk * kCols;  // [kChunk][kChunk + 1]

  const int64_t column_blocks = (c_dim + kCols - 1) / kCols;
  const int64_t row = blockIdx.x / column_blocks;
  const int64_t col0 = (blockIdx.x % column_blocks) * kCols;
  const float* a_row = a + row * length * a_dim;
  const float* b_row = b + row * length * a_dim;
  const float* c_row = c + row * length * c_dim;
  float* out_row = out + row * length * c_dim;

  for (int64_t i = threadIdx.x; i < a_dim * kCols; i += blockDim.x) state[i] = 0.0f;
  for (int64_t t0 = 0; t0 < length; t0 += kChunk) {
    __syncthreads();  // the previous chunk's state update is done
    for (int64_t i = threadIdx.x; i < kChunk * a_dim; i += blockDim.x) {
      const int64_t t = t0 + i / a_dim, e = i % a_dim;
      const bool valid = t < length;
      const int64_t p = position_of(t, length, reverse);
      a_c[i] = valid ? a_row[p * a_dim + e] : 0.0f;
      b_c[i] = valid ? b_row[p * a_dim + e] : 0.0f;
    }
    for (int i = threadIdx.x; i < kChunk * kCols; i += blockDim.x) {
      const int64_t t = t0 + i / kCols, m = col0 + i % kCols;
      c_c[i] =
          (t < length && m < c_dim) ? c_row[position_of(t, length, reverse) * c_dim + m] : 0.0f;
    }
    __syncthreads();
    for (int i = threadIdx.x; i < kChunk * kChunk; i += blockDim.x) {
      const int l = i / kChunk, j = i % kChunk;
      float s = 0.0f;
      if (j <= l)
        for (int64_t e = 0; e < a_dim; ++e) s += a_c[l * a_dim + e] * b_c[j * a_dim + e];
      scores[l * (kChunk + 1) + j] = s;
    }
    __syncthreads();
    for (int i = threadIdx.x; i < kChunk * kCols; i += blockDim.x) {
      const int l = i / kCols, m = i % kCols;
      float inter = 0.0f;  // A_c S: the chunks before
      for (int64_t e = 0; e < a_dim; ++e) inter += a_c[l * a_dim + e] * state[e * kCols + m];
      float intra = 0.0f;  // mask(A_c B_c^T) C_c: this chunk, j <= l
      for (int j = 0; j <= l; ++j) intra += scores[l * (kChunk + 1) + j] * c_c[j * kCols + m];
      const int64_t t = t0 + l, column = col0 + m;
      if (t < length && column < c_dim)
        out_row[position_of(t, length, reverse) * c_dim + column] = inter + intra;
    }
    __syncthreads();  // S is read; now add this chunk
    for (int64_t i = threadIdx.x; i < a_dim * kCols; i += blockDim.x) {
      const int64_t e = i / kCols;
      const int m = static_cast<int>(i % kCols);
      float s = 0.0f;
      for (int l = 0; l < kChunk; ++l) s += b_c[l * a_dim + e] * c_c[l * kCols + m];
      state[i] += s;
    }
  }
}

}  // namespace

int64_t linear_attention_max_key_dim() {
  // shared_floats(E) * 4 <= kMaxSharedBytes
  const int64_t fixed = kChunk * kCols + kChunk * (kChunk + 1);
  return (kMaxSharedBytes / 4 - fixed) / (2 * kChunk + kCols);
}

cudaError_t causal_product_f32(const float* a, const float* b, const float* c, float* out,
                               int64_t rows, int64_t length, int64_t a_dim, int64_t c_dim,
                               bool reverse, cudaStream_t stream) {
  if (rows < 0 || length < 0 || a_dim < 0 || c_dim < 0 || a_dim > linear_attention_max_key_dim())
    return cudaErrorInvalidValue;
  if (rows == 0 || length == 0 || c_dim == 0) return cudaSuccess;
  const int64_t blocks = rows * ((c_dim + kCols - 1) / kCols);
  if (blocks > 0x7fffffff) return cudaErrorInvalidValue;
  const size_t bytes = static_cast<size_t>(shared_floats(a_dim)) * sizeof(float);
  if (bytes > 48 * 1024) {
    if (const cudaError_t status =
            cudaFuncSetAttribute(causal_product_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                 static_cast<int>(bytes));
        status != cudaSuccess)
      return status;
  }
  causal_product_kernel<<<static_cast<unsigned>(blocks), kThreads, bytes, stream>>>(
      a, b, c, out, length, a_dim, c_dim, reverse);
  return cudaGetLastError();
}

cudaError_t causal_linear_attention_forward_f32(const float* q, const float* k, const float* v,
                                                float* out, int64_t rows, int64_t length,
                                                int64_t key_dim, int64_t value_dim,
                                                cudaStream_t stream) {
  return causal_product_f32(q, k, v, out, rows, length, key_dim, value_dim, false, stream);
}

cudaError_t causal_linear_attention_backward_f32(const float* q, const float* k, const float* v,
                                                 const float* dout, float* dq, float* dk, float* dv,
                                                 int64_t rows, int64_t length, int64_t key_dim,
                                                 int64_t value_dim, cudaStream_t stream) {
  // dq_l = sum_{j <= l} (dout_l . v_j) k_j
  if (const cudaError_t s =
          causal_product_f32(dout, v, k, dq, rows, length, value_dim, key_dim, false, stream);
      s != cudaSuccess)
    return s;
  // dv_l = sum_{i >= l} (k_l . q_i) dout_i
  if (const cudaError_t s =
          causal_product_f32(k, q, dout, dv, rows, length, key_dim, value_dim, true, stream);
      s != cudaSuccess)
    return s;
  // dk_l = sum_{i >= l} (v_l . dout_i) q_i
  return causal_product_f32(v, dout, q, dk, rows, length, value_dim, key_dim, true, stream);
}

}  // namespace patchbay::kernels::cuda
