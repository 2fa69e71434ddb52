// The signatures of the engine's dispatch-table kernels (engine/dispatch.hpp) that more than
// one backend implements: the CPU kernels beside their ops (engine/ops/*.cpp) and the CUDA
// entries (core/cuda/cuda_kernels_*.cpp). An op looks its kernel up with the alias declared
// here and a backend registers it with the same alias, so a signature changes in one place
// for every device. Each alias says the layout the op guarantees before calling the kernel.
#pragma once

#include <cstdint>
#include <vector>

#include "engine/ops.hpp"
#include "engine/ops_indexing.hpp"
#include "engine/ops_optimizer.hpp"
#include "engine/tensor.hpp"
#include "patchbay/kernels/cuda/math/unary.hpp"

namespace patchbay::engine::kernel {

// ---- data movement ----
// dst[i] = convert(src[i]); src already expanded to dst's shape (stride 0 on broadcast dims).
using CopyKernel = void(const Tensor& src, Tensor& dst);
// Every element of dst = value (converted to dst's dtype); dst any strides.
using FillKernel = void(Tensor& dst, double value);

// ---- element-wise (all f32; the ops convert other float dtypes around the kernels) ----
// out = a + b; a, b expanded to out's shape.
using AddKernel = void(const Tensor& a, const Tensor& b, Tensor& out);
enum class BinaryKind { kSub, kMul, kDiv };
// out = a (op) b; a, b expanded to out's shape.
using BinaryKernel = void(BinaryKind kind, const Tensor& a, const Tensor& b, Tensor& out);
// The unary ops (neg, abs, exp, log, sqrt, rsqrt, tanh, sigmoid, relu, GELU tanh/erf, SiLU,
// add/mul/pow by a scalar): one enum for every backend, the one whose formulas the CUDA kernels
// and their CPU twins share (kernels/cuda/math/unary.hpp, header-only).
using UnaryKind = kernels::cuda::math::UnaryOp;
// out = f(x) (scalar parameter s for the *Scalar kinds); x any strides, out contiguous.
using UnaryKernel = void(UnaryKind kind, double s, const Tensor& x, Tensor& out);
// dx = grad * f'(x); all contiguous, one shape.
using UnaryBackwardKernel = void(UnaryKind kind, double s, const Tensor& x, const Tensor& grad,
                                 Tensor& dx);
// out = mask != 0 ? value : x; x and mask expanded to out's shape; mask of any dtype.
using MaskedFillKernel = void(const Tensor& x, const Tensor& mask, double value, Tensor& out);
// keep[i] = u[i] >= p ? 1/(1-p) : 0; contiguous.
using DropoutMaskKernel = void(const Tensor& u, double p, Tensor& keep);
// count values into out (device memory of out's device): counter blocks first_block, ... of
// Philox4x32-10 under seed; normal: standard normal (Box-Muller on pairs), else U[low, high).
using RandomKernel = void(float* out, int64_t count, uint64_t first_block, uint64_t seed,
                          bool normal, double low, double high);

// ---- matrix products ----
// a: contiguous [batch_a, rows_a, cols_a] with batch_a in {1, batch} (1 = broadcast), likewise
// b; out: contiguous [batch, m, n]; a and b share dtype f32 or bf16 (or f32 x bf16 weights);
// out has their dtype, or f32 for bf16 operands (f32 accumulation written out unrounded).
struct MatmulProblem {
  int64_t batch = 1, m = 0, n = 0, k = 0;
  bool transpose_a = false, transpose_b = false;
  bool broadcast_a = false, broadcast_b = false;
  // f32 x W^T through the CPU's row-invariant kernel at any number of rows (batch-invariant
  // numerics, engine/ops/batch_invariance.hpp); the CUDA entry does not read it (cuBLASLt).
  bool row_invariant = false;
};
using MatmulKernel = void(const MatmulProblem& p, const Tensor& a, const Tensor& b, Tensor& out);

// ---- normalisation and softmax (contiguous f32 [rows, cols], over the last dim) ----
struct NormShape {
  int64_t rows = 0, cols = 0;
  float eps = 0.f;
};
// y = layer_norm(x) with optional gain/bias (undefined tensors); `mean` and `stat` [rows] are
// the per-row statistics the same device's backward reads: the CPU saves the variance, CUDA
// saves rstd = 1/sqrt(var + eps) (its kernels' form). Only that device's backward reads them.
using LayerNormKernel = void(const NormShape& s, const Tensor& x, const Tensor& gain,
                             const Tensor& bias, Tensor& y, Tensor& mean, Tensor& stat);
// dx, dgain, dbias (dgain/dbias may be undefined = not wanted).
using LayerNormBackwardKernel = void(const NormShape& s, const Tensor& x, const Tensor& dy,
                                     const Tensor& mean, const Tensor& stat, const Tensor& gain,
                                     Tensor& dx, Tensor& dgain, Tensor& dbias);
// y = rms_norm(x) * gain; rstd [rows] (out).
using RmsNormKernel = void(const NormShape& s, const Tensor& x, const Tensor& gain, Tensor& y,
                           Tensor& rstd);
using RmsNormBackwardKernel = void(const NormShape& s, const Tensor& x, const Tensor& dy,
                                   const Tensor& gain, const Tensor& rstd, Tensor& dx,
                                   Tensor& dgain);
// h = x + residual, y = layer_norm(h) (gain/bias [cols] or undefined); mean, rstd [rows] out.
using AddLayerNormKernel = void(const NormShape& s, const Tensor& x, const Tensor& residual,
                                const Tensor& gain, const Tensor& bias, Tensor& h, Tensor& y,
                                Tensor& mean, Tensor& rstd);
// dh (out) from h, dy = dL/dy, gh = dL/dh; dgain/dbias [cols] (out) or undefined.
using AddLayerNormBackwardKernel = void(const NormShape& s, const Tensor& h, const Tensor& dy,
                                        const Tensor& gh, const Tensor& mean, const Tensor& rstd,
                                        const Tensor& gain, Tensor& dh, Tensor& dgain,
                                        Tensor& dbias);
// y = softmax(x) or log_softmax(x) row-wise.
using SoftmaxKernel = void(bool log, const Tensor& x, int64_t rows, int64_t cols, Tensor& y);
// dx from the forward output y and dy (softmax: y*(dy - sum dy*y); log: dy - exp(y) sum dy).
using SoftmaxBackwardKernel = void(bool log, const Tensor& y, const Tensor& dy, int64_t rows,
                                   int64_t cols, Tensor& dx);

// ---- reductions ----
enum class ReduceKind { kSum, kMax };
// x: contiguous f32 [outer, inner]; out: contiguous f32 [outer]; argmax: host [outer] (max).
using ReduceKernel = void(ReduceKind kind, const Tensor& x, int64_t outer, int64_t inner,
                          Tensor& out, int64_t* argmax);
// Scatters grad [outer] into dx [outer, inner] (zeros elsewhere) at argmax (host [outer]).
using MaxBackwardKernel = void(const Tensor& grad, const int64_t* argmax, int64_t outer,
                               int64_t inner, Tensor& dx);
// Sum over the leading dims: x contiguous f32 [rows, cols] -> out [cols].
using ReduceLeadingKernel = void(const Tensor& x, int64_t rows, int64_t cols, Tensor& out);
// x and out f32 contiguous, same shape; the sum runs along dim.
using CumsumKernel = void(const Tensor& x, int64_t dim, bool reverse, Tensor& out);

// ---- cross-entropy ----
// logits f32 contiguous [N, V]; targets contiguous i32/i64, N elements in the caller's shape (so
// messages give the caller's coordinates); row_loss and row_logsumexp f32 [N] (overwritten).
// mean_factors f32 [2] on the logits' device (overwritten) from the number c of rows whose
// target is not ignore_index: [0] = 1/c (NaN when c = 0), what the mean multiplies the summed
// row losses by, and [1] = 1/c (0 when c = 0), what it multiplies the upstream gradient by;
// 1/c computed in double and rounded once (math/index_error.hpp's mean_factors_of_count).
// A device kernel records a bad target in the device's error record instead of throwing
// (engine/device_index_errors.hpp); the CPU's throws at once.
using CrossEntropyForwardKernel = void(const Tensor& logits, const Tensor& targets,
                                       const CrossEntropyOptions& options, Tensor& row_loss,
                                       Tensor& row_logsumexp, Tensor& mean_factors);
// row_grad f32 [N]: d(objective)/d(row loss). grad_logits f32 [N, V] (overwritten).
using CrossEntropyBackwardKernel = void(const Tensor& logits, const Tensor& targets,
                                        const Tensor& row_logsumexp, const Tensor& row_grad,
                                        const CrossEntropyOptions& options, Tensor& grad_logits);

// ---- gather / scatter-add (engine/ops/gather_scatter.cpp) ----
// Float tensors f32 contiguous, index contiguous i32/i64 (on the data's device), shapes checked
// by the op; each kernel refuses an out-of-range index entry with the op's message (the CPU's at
// once; a device's records it for the next read, engine/device_index_errors.hpp).
// out (index's shape) is overwritten.
using GatherKernel = void(const Tensor& input, int64_t dim, const Tensor& index, Tensor& out);
// self is accumulated into in place, each element's additions in index order (deterministic).
using ScatterAddKernel = void(Tensor& self, int64_t dim, const Tensor& index, const Tensor& src);
// grad_src (src's shape) overwritten from grad_out (self's shape).
using ScatterAddBackwardSrcKernel = void(const Tensor& grad_out, int64_t dim, const Tensor& index,
                                         Tensor& grad_src);

// ---- sort / top-k (engine/ops/sort_topk.cpp; along the last dim) ----
// x f32 contiguous [..., length]; values f32 and indices i64 contiguous [..., length].
using SortKernel = void(const Tensor& x, bool descending, Tensor& values, Tensor& indices);
// x f32 contiguous [..., length]; values f32 and indices i64 contiguous [..., k].
using TopkKernel = void(const Tensor& x, int64_t k, bool largest, Tensor& values, Tensor& indices);
// grad_selected f32 and indices i64 contiguous [..., k]; grad_x f32 [..., length] overwritten.
using SelectionBackwardKernel = void(const Tensor& grad_selected, const Tensor& indices,
                                     Tensor& grad_x);

// ---- causal linear attention (engine/ops/causal_linear_attention.cpp) ----
// rows = batch x heads; q, k [rows, T, E], v, out, dout, dv [rows, T, M], dq, dk [rows, T, E]:
// all contiguous f32; outputs overwritten.
struct LinearAttentionShape {
  int64_t rows = 0, length = 0, key_dim = 0, value_dim = 0;
  // bf16 autocast was on at the forward (CPU only): bf16 operands, f32 accumulation and f32
  // results (kernels/cpu/causal_linear_attention.hpp); the tensors stay f32.
  bool bf16 = false;
};
using LinearAttentionForwardKernel = void(const LinearAttentionShape& s, const Tensor& q,
                                          const Tensor& k, const Tensor& v, Tensor& out);
using LinearAttentionBackwardKernel = void(const LinearAttentionShape& s, const Tensor& q,
                                           const Tensor& k, const Tensor& v, const Tensor& dout,
                                           Tensor& dq, Tensor& dk, Tensor& dv);

// ---- embeddings and positions ----
// weights contiguous [V, D] of a float dtype; ids contiguous i32/i64 (n elements); out f32
// contiguous [n, D].
using EmbeddingForwardKernel = void(const Tensor& weights, const Tensor& ids, Tensor& out);
// grad_out f32 contiguous [n, D]; grad_weights f32 contiguous [V, D], accumulated into.
using EmbeddingBackwardKernel = void(const Tensor& grad_out, const Tensor& ids,
                                     Tensor& grad_weights);
// x, out: contiguous f32 [rows, T, D]; inverse: rotate by -angle.
using RotaryKernel = void(const Tensor& x, int64_t position_offset, double theta, bool inverse,
                          Tensor& out);

// ---- fused bias + activation ----
// x32, g32, dx: contiguous f32 [rows, cols]; b32: contiguous f32 [cols]; dbias: [cols].
using BiasActivationForwardKernel = void(FusedActivation act, const Tensor& x32, const Tensor& b32,
                                         Tensor& out, int64_t rows, int64_t cols);
using BiasActivationBackwardKernel = void(FusedActivation act, const Tensor& x32, const Tensor& b32,
                                          const Tensor& g32, Tensor& dx, Tensor& dbias,
                                          int64_t rows, int64_t cols);

// ---- optimizer updates ----
// The op has checked every operand: contiguous, param's device and shape, f32 (bf16_copy bf16
// or undefined; state tensors undefined where the rule has none).
using OptimizerUpdateKernel = void(const OptimizerUpdate& update, Tensor& param, const Tensor& grad,
                                   Tensor& state0, Tensor& state1, Tensor& bf16_copy);

// ---- attention ----
// Element strides {batch, head, seq} of a [B, heads, T, D] operand whose last dim is contiguous.
struct OperandStrides {
  int64_t batch = 0, head = 0, seq = 0;
};
struct AttentionShape {
  int64_t batch = 0, heads = 0, kv_heads = 0, q_len = 0, kv_len = 0, head_dim = 0;
  float scale = 0.f;
  bool causal = false;
  int64_t window = 0;
  OperandStrides q, k, v;              // of the (possibly strided) f32 operands
  std::vector<float> slopes;           // [H] ALiBi slopes, empty = none
  std::vector<std::int32_t> segments;  // [B * Tk] packed-sequence segment ids, empty = none
};
// out [B,H,Tq,D] (out, f32, last dim contiguous, any layout), lse [B,H,Tq] (out, contiguous
// f32); q, k, v all f32 or all bf16 (the CPU's bf16 kernel) with the shape's strides.
using AttentionKernel = void(const AttentionShape& s, const Tensor& q, const Tensor& k,
                             const Tensor& v, Tensor& out, Tensor& lse);
// dq, dk, dv (out, f32, last dim contiguous, any layout; overwritten) from the forward's
// tensors and dout (last dim contiguous, positive seq stride; f32, or bf16 with bf16 q, k, v).
using AttentionBackwardKernel = void(const AttentionShape& s, const Tensor& q, const Tensor& k,
                                     const Tensor& v, const Tensor& out, const Tensor& lse,
                                     const Tensor& dout, Tensor& dq, Tensor& dk, Tensor& dv);

}  // namespace patchbay::engine::kernel
