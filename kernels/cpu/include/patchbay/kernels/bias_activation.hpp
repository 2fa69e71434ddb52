// Fused bias + activation, forward and backward, on contiguous f32 rows: the chain
// "linear's bias add, then the MLP's activation" in one pass each way, where the composed ops
// read and write the [rows, cols] activation twice forward and twice backward.
//
//   forward:  y[r, c] = act(x[r, c] + bias[c])
//   backward: dx[r, c] = g[r, c] * act'(x[r, c] + bias[c]),  dbias[c] = sum_r dx[r, c]
//
// The backward recomputes z = x + bias instead of storing it. dbias sums each column's rows
// in order, in double, so it does not depend on the thread count. gelu_tanh is computed as
// z * sigmoid(2u) (u the tanh argument; the same function, without the cancellation of
// 1 + tanh u for negative z) with a branch-free exp (Cody-Waite reduction, Cephes
// polynomial, |relative error| < 3e-7) that the compiler vectorises; the reference uses
// std::tanh in double.
#pragma once

#include <cstdint>

namespace patchbay::kernels {

enum class BiasActivationKind : std::uint8_t { kGeluTanh, kRelu };

// x, y: [rows, cols]; bias: [cols]. y may alias x.
void bias_activation_forward(BiasActivationKind kind, const float* x, const float* bias, float* y,
                             std::int64_t rows, std::int64_t cols);
// g, dx: [rows, cols] (dx may alias g); dbias: [cols] or null (not wanted).
void bias_activation_backward(BiasActivationKind kind, const float* x, const float* bias,
                              const float* g, float* dx, float* dbias, std::int64_t rows,
                              std::int64_t cols);

// One row on the calling thread (no OpenMP team): y[c] = act(x[c] + bias[c]) for c < n, the
// arithmetic of bias_activation_forward's rows. y may alias x. The skinny matmul's epilogue
// runs it on each thread's freshly summed outputs.
void bias_activation_row(BiasActivationKind kind, const float* x, const float* bias, float* y,
                         std::int64_t n);

// Plain double-precision references of the two (no threads, no approximations).
void bias_activation_reference_forward(BiasActivationKind kind, const float* x, const float* bias,
                                       float* y, std::int64_t rows, std::int64_t cols);
void bias_activation_reference_backward(BiasActivationKind kind, const float* x, const float* bias,
                                        const float* g, float* dx, float* dbias, std::int64_t rows,
                                        std::int64_t cols);

}  // namespace patchbay::kernels
