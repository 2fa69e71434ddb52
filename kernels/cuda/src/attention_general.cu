// Attention for every variant of the engine's op (attention_general.hpp): one warp per query
// row for the forward and dQ, one warp per key row for dK and dV. Lane l holds the head-dim
// entries l, l + 32, ... (C = ceil(D / 32) of them, a template parameter so they stay in
// registers); each key costs one shuffle reduction (two in the backward). The online softmax
// keeps a running max m and sum l per row. Deterministic: every sum has a fixed order.
#include <cmath>

#include "launch.cuh"
#include "patchbay/kernels/cuda/attention_general.hpp"
#include "patchbay/kernels/cuda/math/segments.hpp"
#include "reduce.cuh"

namespace patchbay::kernels::cuda {
namespace {

using detail::warp_sum;

constexpr int kWarps = 4;  // warps (rows) per block
constexpr int kThreads = kWarps * 32;

// Keys [lo, hi) visible from absolute query position pos of batch row b.
struct Span {
  int64_t lo, hi;
};
// The span of pos's segment in batch row b (everything without segments).
__device__ __forceinline__ Span segment_span(const GeneralAttentionShape& s, int64_t b,
                                             int64_t pos) {
  if (s.segments == nullptr) return Span{0, s.kv_len};
  const int32_t* seg = s.segments + b * s.kv_len;
  return Span{math::segment_begin(seg, pos), math::segment_end(seg, s.kv_len, pos)};
}
__device__ __forceinline__ Span visible_keys(const GeneralAttentionShape& s, int64_t b,
                                             int64_t pos) {
  Span span = segment_span(s, b, pos);
  if (s.causal) span.hi = min(span.hi, pos + 1);
  if (s.window > 0) {
    span.lo = max(span.lo, pos - s.window + 1);
    if (!s.causal) span.hi = min(span.hi, pos + s.window);
  }
  return span;
}

// Absolute query positions [lo, hi) that see key j (the inverse of visible_keys).
__device__ __forceinline__ Span seeing_positions(const GeneralAttentionShape& s, int64_t b,
                                                 int64_t j) {
  Span span = segment_span(s, b, j);
  span.lo = max(span.lo, s.kv_len - s.q_len);
  if (s.causal) span.lo = max(span.lo, j);
  if (s.window > 0) {
    span.hi = min(span.hi, j + s.window);
    if (!s.causal) span.lo = max(span.lo, j - s.window + 1);
  }
  return span;
}

// The biased, scaled score of one (query, key) pair from the lane's partial dot product.
__device__ __forceinline__ float score(const GeneralAttentionShape& s, float partial_dot,
                                       float slope, int64_t pos, int64_t j) {
  return warp_sum(partial_dot) * s.scale - slope * fabsf(static_cast<float>(pos - j));
}

template <int C>
__device__ __forceinline__ void load_row(float (&dst)[C], const float* row, int dim, int lane) {
#pragma unroll
  for (int c = 0; c < C; ++c) {
    const int d = lane + 32 * c;  // int: 64-bit lane offsets made ptxas spill
    dst[c] = d < dim ? row[d] : 0.0f;
  }
}

template <int C>
__device__ __forceinline__ float partial_dot(const float (&x)[C], const float* row, int dim,
                                             int lane) {
  float sum = 0.0f;
#pragma unroll
  for (int c = 0; c < C; ++c) {
    const int d = lane + 32 * c;  // int: 64-bit lane offsets made ptxas spill
    if (d < dim) sum += x[c] * row[d];
  }
  return sum;
}

template <int C>
__device__ __forceinline__ void store_row(float* row, const float (&x)[C], float factor, int dim,
                                          int lane) {
#pragma unroll
  for (int c = 0; c < C; ++c) {
    const int d = lane + 32 * c;  // int: 64-bit lane offsets made ptxas spill
    if (d < dim) row[d] = x[c] * factor;
  }
}

// Query row `row` of B*H*Tq: its batch, head and index, and the first element of its K/V head.
struct QueryRow {
  int64_t b, h, i, pos, kv_offset;
};
__device__ __forceinline__ QueryRow query_row(const GeneralAttentionShape& s, int64_t row) {
  QueryRow r;
  r.i = row % s.q_len;
  const int64_t bh = row / s.q_len;
  r.h = bh % s.heads;
  r.b = bh / s.heads;
  r.pos = r.i + s.kv_len - s.q_len;
  const int64_t kv_head = r.h / (s.heads / s.kv_heads);
  r.kv_offset = (r.b * s.kv_heads + kv_head) * s.kv_len * s.head_dim;
  return r;
}

template <int C>
__global__ void __launch_bounds__(kThreads)
    general_forward_kernel(const GeneralAttentionShape s, const float* q, const float* k,
                           const float* v, float* out, float* lse) {
  const int lane = threadIdx.x % 32;
  const int64_t row = int64_t(blockIdx.x) * kWarps + threadIdx.x / 32;
  if (row >= s.batch * s.heads * s.q_len) return;  // the whole warp leaves together
  const int dim = static_cast<int>(s.head_dim);    // <= 256 (valid())
  const QueryRow r = query_row(s, row);
  const float slope = s.has_slopes ? s.slopes[r.h] : 0.0f;
  float q_reg[C], acc[C];
  load_row<C>(q_reg, q + row * dim, dim, lane);
#pragma unroll
  for (int c = 0; c < C; ++c) acc[c] = 0.0f;
  float running_max = -INFINITY, running_sum = 0.0f;
  const Span keys = visible_keys(s, r.b, r.pos);
  for (int64_t j = keys.lo; j < keys.hi; ++j) {
    const float* k_row = k + r.kv_offset + j * dim;
    const float* v_row = v + r.kv_offset + j * dim;
    const float x = score(s, partial_dot<C>(q_reg, k_row, dim, lane), slope, r.pos, j);
    const float new_max = fmaxf(running_max, x);
    const float correction = expf(running_max - new_max);  // 0 at the first key
    const float p = expf(x - new_max);
    running_sum = running_sum * correction + p;
#pragma unroll
    for (int c = 0; c < C; ++c) {
      const int d = lane + 32 * c;  // int: 64-bit lane offsets made ptxas spill
      acc[c] = acc[c] * correction + (d < dim ? p * v_row[d] : 0.0f);
    }
    running_max = new_max;
  }
  const bool any = keys.hi > keys.lo;
  store_row<C>(out + row * dim, acc, any ? 1.0f / running_sum : 0.0f, dim, lane);
  if (lane == 0) lse[row] = any ? running_max + logf(running_sum) : -INFINITY;
}

// dQ of one query row, and delta = dout . out of that row (for the dK/dV kernel).
template <int C>
__global__ void __launch_bounds__(kThreads)
    general_backward_query_kernel(const GeneralAttentionShape s, const float* q, const float* k,
                                  const float* v, const float* out, const float* dout,
                                  const float* lse, float* delta, float* dq) {
  const int lane = threadIdx.x % 32;
  const int64_t row = int64_t(blockIdx.x) * kWarps + threadIdx.x / 32;
  if (row >= s.batch * s.heads * s.q_len) return;
  const int dim = static_cast<int>(s.head_dim);  // <= 256 (valid())
  const QueryRow r = query_row(s, row);
  const float slope = s.has_slopes ? s.slopes[r.h] : 0.0f;
  float q_reg[C], dout_reg[C], dq_acc[C];
  load_row<C>(q_reg, q + row * dim, dim, lane);
  load_row<C>(dout_reg, dout + row * dim, dim, lane);
  const float row_delta = warp_sum(partial_dot<C>(dout_reg, out + row * dim, dim, lane));
  if (lane == 0) delta[row] = row_delta;
#pragma unroll
  for (int c = 0; c < C; ++c) dq_acc[c] = 0.0f;
  const float row_lse = lse[row];
  const Span keys = row_lse == -INFINITY ? Span{0, 0} : visible_keys(s, r.b, r.pos);
  for (int64_t j = keys.lo; j < keys.hi; ++j) {
    const float* k_row = k + r.kv_offset + j * dim;
    const float* v_row = v + r.kv_offset + j * dim;
    const float p =
        expf(score(s, partial_dot<C>(q_reg, k_row, dim, lane), slope, r.pos, j) - row_lse);
    const float dp = warp_sum(partial_dot<C>(dout_reg, v_row, dim, lane));
    const float ds = p * (dp - row_delta);
#pragma unroll
    for (int c = 0; c < C; ++c) {
      const int d = lane + 32 * c;  // int: 64-bit lane offsets made ptxas spill
      if (d < dim) dq_acc[c] += ds * k_row[d];
    }
  }
  store_row<C>(dq + row * dim, dq_acc, s.scale, dim, lane);
}

// dK and dV of one key row, summed over the query heads of its group and the queries that
// see it. Runs after general_backward_query_kernel (delta).
template <int C>
__global__ void __launch_bounds__(kThreads)
    general_backward_key_kernel(const GeneralAttentionShape s, const float* q, const float* k,
                                const float* v, const float* dout, const float* lse,
                                const float* delta, float* dk, float* dv) {
  const int lane = threadIdx.x % 32;
  const int64_t row = int64_t(blockIdx.x) * kWarps + threadIdx.x / 32;
  if (row >= s.batch * s.kv_heads * s.kv_len) return;
  const int dim = static_cast<int>(s.head_dim);  // <= 256 (valid())
  const int64_t j = row % s.kv_len;
  const int64_t kv_head = (row / s.kv_len) % s.kv_heads;
  const int64_t b = row / (s.kv_len * s.kv_heads);
  const int64_t group = s.heads / s.kv_heads;
  float k_reg[C], v_reg[C], dk_acc[C], dv_acc[C];
  load_row<C>(k_reg, k + row * dim, dim, lane);
  load_row<C>(v_reg, v + row * dim, dim, lane);
#pragma unroll
  for (int c = 0; c < C; ++c) dk_acc[c] = dv_acc[c] = 0.0f;
  const Span positions = seeing_positions(s, b, j);
#pragma unroll 1
  for (int64_t h = kv_head * group; h < (kv_head + 1) * group; ++h) {
    const float slope = s.has_slopes ? s.slopes[h] : 0.0f;
    // Query rows of head h that see key j, walked by pointer (row index = position - offset).
    const int64_t first_row = (b * s.heads + h) * s.q_len + positions.lo - (s.kv_len - s.q_len);
    const float* q_ptr = q + first_row * dim;
    const float* dout_ptr = dout + first_row * dim;
    const float* lse_ptr = lse + first_row;
    const float* delta_ptr = delta + first_row;
#pragma unroll 1  // a data-dependent trip count: unrolling only adds live registers
    for (int64_t pos = positions.lo; pos < positions.hi;
         ++pos, q_ptr += dim, dout_ptr += dim, ++lse_ptr, ++delta_ptr) {
      const float p =
          expf(score(s, partial_dot<C>(k_reg, q_ptr, dim, lane), slope, pos, j) - *lse_ptr);
      const float dp = warp_sum(partial_dot<C>(v_reg, dout_ptr, dim, lane));
      const float ds = p * (dp - *delta_ptr);
#pragma unroll
      for (int c = 0; c < C; ++c) {
        const int d = lane + 32 * c;  // int: 64-bit lane offsets made ptxas spill
        if (d < dim) {
          dv_acc[c] += p * dout_ptr[d];
          dk_acc[c] += ds * q_ptr[d];
        }
      }
    }
  }
  store_row<C>(dk + row * dim, dk_acc, s.scale, dim, lane);
  store_row<C>(dv + row * dim, dv_acc, 1.0f, dim, lane);
}

bool valid(const GeneralAttentionShape& s) {
  return s.heads > 0 && s.heads <= kGeneralAttentionMaxHeads && s.kv_heads > 0 &&
         s.heads % s.kv_heads == 0 && s.head_dim > 0 && s.head_dim <= kGeneralAttentionMaxHeadDim &&
         s.q_len >= 0 && s.kv_len >= 0 && s.window >= 0;
}

unsigned blocks_for(int64_t rows) { return static_cast<unsigned>((rows + kWarps - 1) / kWarps); }

// Calls launch.template operator()<C>() with C = ceil(head_dim / 32) as a constant.
template <typename Launch>
cudaError_t with_lane_dims(int64_t head_dim, Launch&& launch) {
  switch ((head_dim + 31) / 32) {
    case 1:
      return launch.template operator()<1>();
    case 2:
      return launch.template operator()<2>();
    case 3:
      return launch.template operator()<3>();
    case 4:
      return launch.template operator()<4>();
    case 5:
      return launch.template operator()<5>();
    case 6:
      return launch.template operator()<6>();
    case 7:
      return launch.template operator()<7>();
    case 8:
      return launch.template operator()<8>();
    default:
      return cudaErrorInvalidValue;
  }
}

}  // namespace

cudaError_t general_attention_forward(const GeneralAttentionShape& s, const float* q,
                                      const float* k, const float* v, float* out, float* lse,
                                      cudaStream_t stream) {
  if (!valid(s)) return cudaErrorInvalidValue;
  const int64_t rows = s.batch * s.heads * s.q_len;
  if (rows == 0) return cudaSuccess;
  return with_lane_dims(s.head_dim, [&]<int C>() {
    general_forward_kernel<C><<<blocks_for(rows), kThreads, 0, stream>>>(s, q, k, v, out, lse);
    return cudaGetLastError();
  });
}

cudaError_t general_attention_backward(const GeneralAttentionShape& s, const float* q,
                                       const float* k, const float* v, const float* out,
                                       const float* dout, const float* lse, float* delta, float* dq,
                                       float* dk, float* dv, cudaStream_t stream) {
  if (!valid(s)) return cudaErrorInvalidValue;
  const int64_t query_rows = s.batch * s.heads * s.q_len;
  const int64_t key_rows = s.batch * s.kv_heads * s.kv_len;
  return with_lane_dims(s.head_dim, [&]<int C>() {
    if (query_rows > 0)
      general_backward_query_kernel<C>
          <<<blocks_for(query_rows), kThreads, 0, stream>>>(s, q, k, v, out, dout, lse, delta, dq);
    if (key_rows > 0)
      general_backward_key_kernel<C>
          <<<blocks_for(key_rows), kThreads, 0, stream>>>(s, q, k, v, dout, lse, delta, dk, dv);
    return cudaGetLastError();
  });
}

}  // namespace patchbay::kernels::cuda
