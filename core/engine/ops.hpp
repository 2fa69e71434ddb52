// Every engine op: forward + autograd backward, on any device with a registered kernel.
// Shapes follow PyTorch conventions (broadcasting from the trailing dim, negative dims count
// from the end). Float ops accept f32/bf16/f16 and compute in f32 internally; the output has
// the input dtype (binary ops: both inputs must share a dtype). Errors throw patchbay::Error
// with the op name, what was expected and what was found.
//
// Each op lives in core/engine/ops/<group>.cpp with its kernel registration; the plain
// reference implementations used by the tests live in core/engine/reference/.
// Indexing ops (embedding, cross-entropy, cumsum, gather/scatter, sort/top-k) are declared
// in engine/ops_indexing.hpp.
#pragma once

#include <cstdint>
#include <optional>
#include <utility>
#include <vector>

#include "engine/autograd.hpp"
#include "engine/generator.hpp"
#include "engine/tensor.hpp"

namespace patchbay::engine {

// ---- creation ----
Tensor zeros(const Shape& shape, DType dtype = DType::kF32, Device device = cpu());
Tensor ones(const Shape& shape, DType dtype = DType::kF32, Device device = cpu());
Tensor full(const Shape& shape, double value, DType dtype = DType::kF32, Device device = cpu());
Tensor zeros_like(const Tensor& x);
Tensor ones_like(const Tensor& x);
// [start, end) in steps of `step`: ceil((end - start) / step) elements.
Tensor arange(double start, double end, double step = 1.0, DType dtype = DType::kI64,
              Device device = cpu());
// Standard normal / uniform [low, high) from `gen` (deterministic given the seed and the
// number of values drawn before; independent of OMP_NUM_THREADS).
Tensor randn(const Shape& shape, Generator& gen, DType dtype = DType::kF32, Device device = cpu());
Tensor uniform(const Shape& shape, Generator& gen, double low = 0.0, double high = 1.0,
               DType dtype = DType::kF32, Device device = cpu());
// In-place fill of all elements of x (any view); not recorded by autograd.
void fill_(Tensor& x, double value);
// In-place copy src -> dst (same shape, broadcast allowed, dtype converted); not recorded.
void copy_(Tensor& dst, const Tensor& src);

// ---- element-wise, broadcasting ----
Tensor add(const Tensor& a, const Tensor& b);
Tensor sub(const Tensor& a, const Tensor& b);
Tensor mul(const Tensor& a, const Tensor& b);
Tensor div(const Tensor& a, const Tensor& b);
Tensor neg(const Tensor& x);
Tensor add_scalar(const Tensor& x, double s);
Tensor mul_scalar(const Tensor& x, double s);
Tensor pow_scalar(const Tensor& x, double exponent);  // x^p (x > 0 unless p is an integer)
Tensor exp(const Tensor& x);
Tensor log(const Tensor& x);
Tensor sqrt(const Tensor& x);
Tensor rsqrt(const Tensor& x);
Tensor abs(const Tensor& x);
Tensor tanh(const Tensor& x);
Tensor sigmoid(const Tensor& x);
// ---- activations ----
Tensor relu(const Tensor& x);
Tensor gelu_tanh(const Tensor& x);  // 0.5x(1+tanh(sqrt(2/pi)(x+0.044715x^3)))
Tensor gelu_erf(const Tensor& x);   // 0.5x(1+erf(x/sqrt 2))
Tensor silu(const Tensor& x);       // x*sigmoid(x)

inline Tensor operator+(const Tensor& a, const Tensor& b) { return add(a, b); }
inline Tensor operator-(const Tensor& a, const Tensor& b) { return sub(a, b); }
inline Tensor operator*(const Tensor& a, const Tensor& b) { return mul(a, b); }
inline Tensor operator/(const Tensor& a, const Tensor& b) { return div(a, b); }
inline Tensor operator-(const Tensor& x) { return neg(x); }
inline Tensor operator+(const Tensor& a, double s) { return add_scalar(a, s); }
inline Tensor operator*(const Tensor& a, double s) { return mul_scalar(a, s); }

// Shape of broadcasting a with b (throws when incompatible).
Shape broadcast_shapes(const Shape& a, const Shape& b);
// Sums `grad` over broadcast dims so it has `shape` (the inverse of expand, for backward).
Tensor sum_to_shape(const Tensor& grad, const Shape& shape);

// ---- reductions (dims may be negative; empty dims = all) ----
Tensor sum(const Tensor& x, const std::vector<int64_t>& dims = {}, bool keepdim = false);
Tensor mean(const Tensor& x, const std::vector<int64_t>& dims = {}, bool keepdim = false);
// Max over dims; the gradient goes to the first maximal element of each reduced group.
Tensor max(const Tensor& x, const std::vector<int64_t>& dims = {}, bool keepdim = false);

// ---- linear algebra ----
// a [..., M, K] (or [..., K, M] with transpose_a) times b [..., K, N] (or [..., N, K] with
// transpose_b) -> [..., M, N]; batch dims broadcast; 1-D operands are not promoted.
// CPU: oneDNN; bf16 inputs give bf16 output with f32 accumulation.
Tensor matmul(const Tensor& a, const Tensor& b, bool transpose_a = false, bool transpose_b = false);

// ---- normalisation and softmax (over the last dim) ----
Tensor softmax(const Tensor& x);
Tensor log_softmax(const Tensor& x);
// y = (x - mean) / sqrt(var + eps) * gain + bias over the last dim; gain/bias [C] (bias may be
// undefined).
Tensor layer_norm(const Tensor& x, const Tensor& gain, const Tensor& bias, double eps = 1e-5);
// {h, y}: h = x + residual and y = layer_norm(h, gain, bias, eps) in one pass (a pre-norm
// block's residual add and the norm after it). Same values as add() then layer_norm() up to
// f32 rounding; both outputs take part in autograd (x and residual get dL/dh + the norm's
// dL/dh). f32 runs fused; other dtypes run the two ops.
std::pair<Tensor, Tensor> add_layer_norm(const Tensor& x, const Tensor& residual,
                                         const Tensor& gain, const Tensor& bias, double eps = 1e-5);
// y = x / sqrt(mean(x^2) + eps) * gain over the last dim; gain [C].
Tensor rms_norm(const Tensor& x, const Tensor& gain, double eps = 1e-6);

// ---- shape ops (views where possible) ----
Tensor view(const Tensor& x, const Shape& shape);
Tensor reshape(const Tensor& x, const Shape& shape);
Tensor permute(const Tensor& x, const Shape& dims);
Tensor transpose(const Tensor& x, int64_t d0, int64_t d1);
Tensor slice(const Tensor& x, int64_t dim, int64_t start, int64_t end, int64_t step = 1);
Tensor narrow(const Tensor& x, int64_t dim, int64_t start, int64_t length);
Tensor expand(const Tensor& x, const Shape& shape);
Tensor unsqueeze(const Tensor& x, int64_t dim);
Tensor squeeze(const Tensor& x, int64_t dim);
Tensor contiguous(const Tensor& x);
Tensor concat(const std::vector<Tensor>& xs, int64_t dim);
Tensor stack(const std::vector<Tensor>& xs, int64_t dim);
Tensor to_dtype(const Tensor& x, DType dtype);  // differentiable between float dtypes

// ---- masking and regularisation ----
// Where mask (any dtype, non-zero = true; broadcast to x) is true, value; else x.
Tensor masked_fill(const Tensor& x, const Tensor& mask, double value);
// Zeroes each element with probability p and scales the rest by 1/(1-p); identity when
// !training or p == 0.
Tensor dropout(const Tensor& x, double p, Generator& gen, bool training = true);

// ---- fused attention (never materialises Tq x Tk) ----
// q [B,H,Tq,D], k/v [B,H,Tk,D] -> [B,H,Tq,D]. causal aligns the mask to the bottom-right
// (query i sees keys j <= i + Tk - Tq). scale defaults to 1/sqrt(D) when not given.
Tensor scaled_dot_product_attention(const Tensor& q, const Tensor& k, const Tensor& v, bool causal,
                                    std::optional<double> scale = std::nullopt);

// The options of ops-table version 3 (pb_attention_options; semantics in sdk ops.h and
// kernels/cpu attention_flash.hpp). Query i sits at position p = i + Tk - Tq.
struct AttentionOptions {
  bool causal = false;
  std::optional<double> scale;  // default 1/sqrt(D)
  int64_t window = 0;           // 0 = unlimited; else |p - j| < window (and j <= p if causal)
  Tensor alibi_slopes;          // undefined = none; else float [H]: bias -slope_h * |p - j|
  // Block-sparse attention (ops table version 4): undefined = dense tiles; else int [H,
  // ceil(Tk/bs), ceil(Tk/bs)] 0/1 over (absolute query block, key block); only tiles marked
  // 1 are computed (ops/attention_options.cpp), forward and backward. Not with ALiBi.
  Tensor block_layout;
  int64_t block_size = 0;
  // Packed sequences (ops table version 13): undefined = none; else integer [B, Tk],
  // non-decreasing along each row: a query at position p sees key j only when
  // segment_ids[b][j] == segment_ids[b][p] (kernels' AttentionParams::segment_ids); CPU and CUDA.
  Tensor segment_ids;
};
// The block-sparse path of scaled_dot_product_attention (ops/attention_options.cpp).
Tensor block_sparse_attention(const Tensor& q, const Tensor& k, const Tensor& v, bool causal,
                              float scale, int64_t window, const Tensor& layout,
                              int64_t block_size);
// With options; f32 q/k/v views whose last dim is contiguous are read in place (a KV-cache
// slice costs no copy). Differentiable in q, k, v (not in the slopes).
Tensor scaled_dot_product_attention(const Tensor& q, const Tensor& k, const Tensor& v,
                                    const AttentionOptions& options);

// ---- fused elementwise chains (ops table version 7) ----
// act(x + bias) in one pass, backward in one pass (kernels/cpu bias_activation.hpp): x [..., N]
// float, bias [N] of x's dtype and device; act is kGeluTanh or kRelu (the MLP's activations
// after its first linear). Differentiable in x and bias; equal to the composed ops up to
// rounding (the GELU's tanh is a vectorised approximation, |relative error| < 3e-7).
enum class FusedActivation { kGeluTanh, kRelu };
Tensor bias_activation(const Tensor& x, const Tensor& bias, FusedActivation activation);

// ---- fused linear layer (ops table version 10) ----
// act(x · weightᵀ + bias): x [..., K] float, weight [N, K] (x's dtype, or bf16 with f32 x),
// bias [N] or undefined, out [..., N]. Where no gradient is recorded, bf16 autocast is off
// and x is f32 with at most kernels::kSkinnyMaxRows rows (decoding), one skinny-matmul pass
// with the bias and activation as its epilogue; otherwise matmul then bias_activation (or
// add, or the activation alone), so gradients and training are those ops' own.
enum class LinearActivation { kNone, kGeluTanh, kRelu };
Tensor linear(const Tensor& x, const Tensor& weight, const Tensor& bias,
              LinearActivation activation = LinearActivation::kNone);

}  // namespace patchbay::engine

#include "engine/autocast.hpp"
#include "engine/ops_indexing.hpp"
