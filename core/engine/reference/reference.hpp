// Plain, obviously-correct reference implementations of the engine's ops, used only by the
// tests: naive loops in double precision over row-major std::vector<double> data. No
// OpenMP, no oneDNN, no strides. Shapes are given explicitly; broadcasting follows the
// numpy rules.
#pragma once

#include <cstdint>
#include <functional>
#include <vector>

namespace patchbay::engine::reference {

using Shape = std::vector<int64_t>;
using Values = std::vector<double>;

struct Array {
  Shape shape;
  Values values;  // row-major
};

int64_t numel(const Shape& shape);
// Element-wise binary op with numpy broadcasting.
Array broadcast_binary(const Array& a, const Array& b,
                       const std::function<double(double, double)>& f);
Array unary(const Array& x, const std::function<double(double)>& f);
// Reduce over the listed dims (all when empty) with keepdim; op is "sum", "mean" or "max".
Array reduce(const Array& x, std::vector<int64_t> dims, bool keepdim, const char* op);
// a [batch..., M, K] (or K,M with ta) x b [batch..., K, N] (or N,K with tb); batch dims broadcast.
Array matmul(const Array& a, const Array& b, bool transpose_a, bool transpose_b);
Array softmax_last(const Array& x, bool log);
Array layer_norm_last(const Array& x, const Values& gain, const Values& bias, double eps);
Array rms_norm_last(const Array& x, const Values& gain, double eps);
Array permute(const Array& x, const Shape& dims);
Array concat(const std::vector<Array>& xs, int64_t dim);
// Naive attention: q [B,H,Tq,D], k/v [B,H,Tk,D], bottom-right causal alignment.
Array attention(const Array& q, const Array& k, const Array& v, bool causal, double scale);

double gelu_tanh(double x);
double gelu_erf(double x);
double silu(double x);
double sigmoid(double x);

}  // namespace patchbay::engine::reference
