// oneDNN primitives on raw CPU buffers: the compute layer under the tensor engine's CPU
// backend. Each function builds (once per distinct shape/stride/dtype/attribute set) a
// oneDNN 2.6 primitive, keeps it in a process-wide LRU cache, and executes it on the
// caller's buffers. Nothing here allocates tensors or knows about autograd: the caller
// owns every buffer, passes element strides, and keeps whatever the backward needs.
//
// Contracts common to every function:
//  - Buffers are host memory owned by the caller; nothing is retained after return.
//    Input and output buffers must not overlap unless a function says otherwise.
//  - Any alignment works; 64-byte-aligned buffers are fastest (measured: f32 matmul on
//    16-byte-aligned buffers ran ~20% slower, 256x768x768 and 256x50304x768, 2 threads).
//  - Counts and strides are in elements (not bytes). bf16 buffers hold raw bfloat16
//    bits (uint16_t, the upper half of an IEEE f32).
//  - Errors throw patchbay::Error: kInvalidArgument for bad shapes/strides/dtypes (the
//    message names the op and the shapes), kInternal when oneDNN itself fails.
//  - Thread safety: every function may be called from several threads at once. The
//    engine is process-wide; each calling thread gets its own CPU stream over it.
//    Inside one call oneDNN parallelises with OpenMP, so threads follow
//    OMP_NUM_THREADS (Debian's libdnnl is built with DNNL_CPU_RUNTIME=OMP).
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

namespace patchbay::onednn {

enum class DType : std::uint8_t { kF32, kBF16 };

// Size in bytes of one element of `dtype`.
std::size_t dtype_size(DType dtype);

// ---------------------------------------------------------------------------------------
// matmul / batched matmul
//
// For b in [0, batch):  C[b] = alpha * A[b] @ B[b]  + beta * C[b]
//   A[b] is logically [m, k], B[b] is logically [k, n], C[b] is [m, n].
// Element (b, i, j) of an operand lives at data + b*batch_stride + i*row_stride +
// j*col_stride. A transpose is expressed through strides: for A stored row-major as
// [k, m] (i.e. computing A^T @ B), pass row_stride = 1, col_stride = m.
// batch_stride = 0 on A or B broadcasts that operand over the batch (x @ W).
// C must be a dense-in-one-dimension matrix: col_stride == 1 or row_stride == 1; C's
// batch_stride must be nonzero when batch > 1.
// Accumulation is always f32. bf16 inputs run on AMX / AVX512-BF16 when present.
// An f32 B whose row pitch is a multiple of 4 KiB (e.g. n = 3072), or of 1 KiB with k >= 1536
// and m >= 128, is reordered into oneDNN's packed layout before the GEMM (per-thread buffer;
// see matmul.cpp for why).
// Supported dtypes: A and B both f32, or both bf16; C f32 or bf16 (C f32 only with f32
// inputs or bf16 inputs; C bf16 only with bf16 inputs).
// beta != 0 reads C before writing it (oneDNN sum post-op); beta == 0 never reads C
// (C may hold NaN garbage).
struct MatrixOperand {
  const void* data = nullptr;
  DType dtype = DType::kF32;
  std::int64_t batch_stride = 0;
  std::int64_t row_stride = 0;
  std::int64_t col_stride = 1;
};

struct MatrixOutput {
  void* data = nullptr;
  DType dtype = DType::kF32;
  std::int64_t batch_stride = 0;
  std::int64_t row_stride = 0;
  std::int64_t col_stride = 1;
};

struct MatmulArgs {
  std::int64_t batch = 1;
  std::int64_t m = 0;
  std::int64_t n = 0;
  std::int64_t k = 0;
  MatrixOperand a;  // [batch, m, k]
  MatrixOperand b;  // [batch, k, n]
  MatrixOutput c;   // [batch, m, n] (out)
  float alpha = 1.0f;
  float beta = 0.0f;
};

void matmul(const MatmulArgs& args);

// Convenience: contiguous row-major C[m,n] = op(A) @ op(B) in f32 where op transposes when
// the flag is set; A is stored [m,k] (or [k,m] if transpose_a), B is stored [k,n] (or
// [n,k] if transpose_b). Equivalent to matmul() with the matching strides.
void matmul_2d_f32(const float* a, const float* b, float* c, std::int64_t m, std::int64_t n,
                   std::int64_t k, bool transpose_a, bool transpose_b);

// ---------------------------------------------------------------------------------------
// softmax / log-softmax over the last axis of a contiguous [rows, cols] f32 buffer.
//
// forward:  dst = softmax(src) or log_softmax(src) row by row. src == dst is allowed.
// backward: needs the forward's dst (not src):
//   softmax:     diff_src = dst * (diff_dst - sum_j(diff_dst * dst))
//   log-softmax: diff_src = diff_dst - exp(dst) * sum_j(diff_dst)
enum class SoftmaxKind : std::uint8_t { kSoftmax, kLogSoftmax };

void softmax_forward(SoftmaxKind kind, const float* src, float* dst, std::int64_t rows,
                     std::int64_t cols);
void softmax_backward(SoftmaxKind kind, const float* dst, const float* diff_dst,
                      float* diff_src, std::int64_t rows, std::int64_t cols);

// ---------------------------------------------------------------------------------------
// layer normalization over the last axis of a contiguous [rows, cols] f32 buffer.
//
// forward: dst[r, c] = gain[c] * (src[r, c] - mean[r]) / sqrt(var[r] + epsilon) + bias[c]
//   gain, bias: [cols] or nullptr (then 1 / 0). mean, variance: [rows] (out), the biased
//   variance; pass both nullptr when no backward will follow (inference).
// backward: from src, diff_dst and the saved mean/variance computes diff_src [rows, cols]
//   (out), and diff_gain / diff_bias [cols] (out; each may be nullptr when not wanted, and
//   diff_gain requires gain != nullptr). epsilon must equal the forward's.
struct LayerNormForwardArgs {
  std::int64_t rows = 0;
  std::int64_t cols = 0;
  float epsilon = 1e-5f;
  const float* src = nullptr;   // [rows, cols]
  const float* gain = nullptr;  // [cols] or nullptr
  const float* bias = nullptr;  // [cols] or nullptr
  float* dst = nullptr;         // [rows, cols] (out)
  float* mean = nullptr;        // [rows] (out) or nullptr
  float* variance = nullptr;    // [rows] (out) or nullptr
};

struct LayerNormBackwardArgs {
  std::int64_t rows = 0;
  std::int64_t cols = 0;
  float epsilon = 1e-5f;
  const float* src = nullptr;       // [rows, cols] forward input
  const float* diff_dst = nullptr;  // [rows, cols]
  const float* mean = nullptr;      // [rows] saved by forward
  const float* variance = nullptr;  // [rows] saved by forward
  const float* gain = nullptr;      // [cols] or nullptr (forward's gain)
  float* diff_src = nullptr;        // [rows, cols] (out)
  float* diff_gain = nullptr;       // [cols] (out) or nullptr
  float* diff_bias = nullptr;       // [cols] (out) or nullptr
};

void layer_norm_forward(const LayerNormForwardArgs& args);
void layer_norm_backward(const LayerNormBackwardArgs& args);

// ---------------------------------------------------------------------------------------
// element-wise activations over `count` contiguous elements.
//
// kGeluTanh is 0.5x(1+tanh(sqrt(2/pi)(x+0.044715x^3))); kGeluErf is 0.5x(1+erf(x/sqrt2));
// kSwish is x*sigmoid(x) (SiLU); kLogistic is sigmoid.
// forward: f32 -> f32, or bf16 -> bf16 (computed in f32 inside). src == dst is allowed.
// backward (f32 only): diff_src = f'(x) * diff_dst. Pass the forward's src and/or dst:
//   eltwise_backward_needs_dst(kind) == true  -> only `dst` is required (src may be null);
//     these use oneDNN's *_use_dst_for_bwd algorithms, which are exact because f' is a
//     function of y: relu (y>0 <=> x>0), tanh (1-y^2), logistic (y(1-y)), exp (y),
//     sqrt (1/(2y)).
//   otherwise (gelu_tanh, gelu_erf, log, swish) `src` is required (dst ignored).
enum class EltwiseKind : std::uint8_t {
  kRelu,
  kGeluTanh,
  kGeluErf,
  kTanh,
  kLogistic,
  kExp,
  kLog,
  kSqrt,
  kSwish
};

const char* eltwise_name(EltwiseKind kind);
bool eltwise_backward_needs_dst(EltwiseKind kind);

void eltwise_forward(EltwiseKind kind, DType dtype, const void* src, void* dst,
                     std::int64_t count);
void eltwise_backward(EltwiseKind kind, const float* src, const float* dst,
                      const float* diff_dst, float* diff_src, std::int64_t count);

// ---------------------------------------------------------------------------------------
// primitive cache: one entry per distinct (op, shapes, strides, dtypes, attributes).
// Bounded LRU; the default capacity is 1024 entries. Counters are process-wide.
struct PrimitiveCacheStats {
  std::uint64_t hits = 0;
  std::uint64_t misses = 0;  // each miss created one primitive
  std::size_t entries = 0;
  std::size_t capacity = 0;
};

PrimitiveCacheStats primitive_cache_stats();
// Drops every entry (running primitives stay alive until their call returns) and resets
// the hit/miss counters.
void primitive_cache_clear();
// Shrinks (evicting least recently used) or grows the cache. capacity >= 1.
void primitive_cache_set_capacity(std::size_t capacity);

// "oneDNN 2.6.3 (OpenMP), ISA avx512_core_amx" — for logs and benchmark headers.
std::string onednn_build_description();

}  // namespace patchbay::onednn
