// Element-wise ops other than add: sub/mul/div (broadcasting), neg and scalar ops, the
// unary math functions and the activations. Forward and the derivative of every unary op
// are written once (kernels/cuda/math/unary.hpp, shared with the CUDA kernels) for the CPU loops;
// on large contiguous f32 buffers the activations and exp/log/sqrt/tanh/sigmoid run through
// onednn::eltwise_forward / eltwise_backward instead.
#include <cmath>

#include "engine/autograd.hpp"
#include "engine/cpu/strided_loop.hpp"
#include "engine/dispatch.hpp"
#include "engine/kernel_signatures.hpp"
#include "engine/ops/batch_invariance.hpp"
#include "engine/ops/op_helpers.hpp"
#include "onednn/onednn_ops.hpp"

namespace patchbay::engine {
namespace {

using kernel::BinaryKernel;
using kernel::BinaryKind;
using kernel::UnaryBackwardKernel;
using kernel::UnaryKernel;
using kernel::UnaryKind;

// One formula per op and its derivative, shared with the CUDA kernels and their CPU twins.
using kernels::cuda::math::unary_derivative;
using kernels::cuda::math::unary_value;

void binary_cpu(BinaryKind kind, const Tensor& a, const Tensor& b, Tensor& out) {
  const float* pa = a.data<float>();
  const float* pb = b.data<float>();
  float* po = out.data<float>();
  loops::for_each_row<3>(
      out.shape(), {a.strides(), b.strides(), out.strides()},
      [&](const std::array<int64_t, 3>& off, int64_t n, const std::array<int64_t, 3>& st) {
        const float* x = pa + off[0];
        const float* y = pb + off[1];
        float* z = po + off[2];
        switch (kind) {
          case BinaryKind::kSub:
            for (int64_t i = 0; i < n; ++i) z[i * st[2]] = x[i * st[0]] - y[i * st[1]];
            break;
          case BinaryKind::kMul:
            for (int64_t i = 0; i < n; ++i) z[i * st[2]] = x[i * st[0]] * y[i * st[1]];
            break;
          case BinaryKind::kDiv:
            for (int64_t i = 0; i < n; ++i) z[i * st[2]] = x[i * st[0]] / y[i * st[1]];
            break;
        }
      });
}
PATCHBAY_REGISTER_KERNEL(BinaryKernel, "binary", DeviceType::kCpu, binary_cpu);

bool onednn_kind(UnaryKind k, onednn::EltwiseKind* out) {
  switch (k) {
    case UnaryKind::kRelu:
      *out = onednn::EltwiseKind::kRelu;
      return true;
    case UnaryKind::kGeluTanh:
      *out = onednn::EltwiseKind::kGeluTanh;
      return true;
    case UnaryKind::kGeluErf:
      *out = onednn::EltwiseKind::kGeluErf;
      return true;
    case UnaryKind::kTanh:
      *out = onednn::EltwiseKind::kTanh;
      return true;
    case UnaryKind::kSigmoid:
      *out = onednn::EltwiseKind::kLogistic;
      return true;
    case UnaryKind::kExp:
      *out = onednn::EltwiseKind::kExp;
      return true;
    case UnaryKind::kLog:
      *out = onednn::EltwiseKind::kLog;
      return true;
    case UnaryKind::kSqrt:
      *out = onednn::EltwiseKind::kSqrt;
      return true;
    case UnaryKind::kSilu:
      *out = onednn::EltwiseKind::kSwish;
      return true;
    default:
      return false;
  }
}

void unary_cpu(UnaryKind kind, double s, const Tensor& x, Tensor& out) {
  const float* px = x.data<float>();
  float* po = out.data<float>();
  const auto sf = static_cast<float>(s);
  onednn::EltwiseKind ek;
  // Small: the loop is faster, but rounds differently from oneDNN, so where batch invariance
  // is wanted (batch_invariance.hpp) every size takes oneDNN (whose results are per element).
  const bool any_size = batch_invariance_wanted(grad_enabled());
  if (x.is_contiguous() && (x.numel() >= 16384 || any_size) && onednn_kind(kind, &ek)) {
    onednn::eltwise_forward(ek, onednn::DType::kF32, px, po, x.numel());
    return;
  }
  loops::for_each_row<2>(
      x.shape(), {x.strides(), out.strides()},
      [&](const std::array<int64_t, 2>& off, int64_t n, const std::array<int64_t, 2>& st) {
        for (int64_t i = 0; i < n; ++i)
          po[off[1] + i * st[1]] = unary_value(kind, sf, px[off[0] + i * st[0]]);
      });
}
PATCHBAY_REGISTER_KERNEL(UnaryKernel, "unary", DeviceType::kCpu, unary_cpu);

void unary_backward_cpu(UnaryKind kind, double s, const Tensor& x, const Tensor& grad, Tensor& dx) {
  const float* px = x.data<float>();
  const float* pg = grad.data<float>();
  float* pd = dx.data<float>();
  const int64_t n = x.numel();
  onednn::EltwiseKind ek;
  if (n >= 16384 && onednn_kind(kind, &ek)) {
    if (onednn::eltwise_backward_needs_dst(ek)) {
      Tensor y = Tensor::empty(x.shape(), DType::kF32, x.device());
      onednn::eltwise_forward(ek, onednn::DType::kF32, px, y.data<float>(), n);
      onednn::eltwise_backward(ek, nullptr, y.data<float>(), pg, pd, n);
    } else {
      onednn::eltwise_backward(ek, px, nullptr, pg, pd, n);
    }
    return;
  }
  const auto sf = static_cast<float>(s);
#pragma omp parallel for schedule(static) if (n > 32768)
  for (int64_t i = 0; i < n; ++i) pd[i] = pg[i] * unary_derivative(kind, sf, px[i]);
}
PATCHBAY_REGISTER_KERNEL(UnaryBackwardKernel, "unary_backward", DeviceType::kCpu,
                         unary_backward_cpu);

Tensor binary(BinaryKind kind, const char* name, const Tensor& a, const Tensor& b) {
  detail::check_same(a, b, name);
  Shape out_shape = broadcast_shapes(a.shape(), b.shape());
  Tensor out = Tensor::empty(out_shape, DType::kF32, a.device());
  find_kernel<BinaryKernel>("binary", a.device().type)(kind, detail::as_f32(a).expand(out_shape),
                                                       detail::as_f32(b).expand(out_shape), out);
  out = detail::from_f32(out, a.dtype());
  Tensor a_saved = a.detach(), b_saved = b.detach();
  record_op(name, {a, b}, {&out}, [kind, a_saved, b_saved](const std::vector<Tensor>& g) {
    const Shape& sa = a_saved.shape();
    const Shape& sb = b_saved.shape();
    switch (kind) {
      case BinaryKind::kSub:
        return std::vector<Tensor>{sum_to_shape(g[0], sa), sum_to_shape(neg(g[0]), sb)};
      case BinaryKind::kMul:
        return std::vector<Tensor>{sum_to_shape(mul(g[0], b_saved), sa),
                                   sum_to_shape(mul(g[0], a_saved), sb)};
      case BinaryKind::kDiv: {
        Tensor ga = div(g[0], b_saved);
        Tensor gb = neg(div(mul(ga, a_saved), b_saved));  // -g a / b^2
        return std::vector<Tensor>{sum_to_shape(ga, sa), sum_to_shape(gb, sb)};
      }
    }
    return std::vector<Tensor>{};
  });
  return out;
}

Tensor unary(UnaryKind kind, const char* name, const Tensor& x, double s = 0.0) {
  detail::check_float(x, name);
  Tensor out = Tensor::empty(x.shape(), DType::kF32, x.device());
  find_kernel<UnaryKernel>("unary", x.device().type)(kind, s, detail::as_f32(x), out);
  out = detail::from_f32(out, x.dtype());
  record_op(name, {x}, {&out}, [kind, s, x_saved = x.detach()](const std::vector<Tensor>& g) {
    Tensor x32 = detail::as_f32_contiguous(x_saved);
    Tensor g32 = detail::as_f32_contiguous(g[0]);
    Tensor dx = Tensor::empty(x32.shape(), DType::kF32, x32.device());
    find_kernel<UnaryBackwardKernel>("unary_backward", x32.device().type)(kind, s, x32, g32, dx);
    return std::vector<Tensor>{detail::from_f32(dx, x_saved.dtype())};
  });
  return out;
}

}  // namespace

Tensor sub(const Tensor& a, const Tensor& b) { return binary(BinaryKind::kSub, "sub", a, b); }
Tensor mul(const Tensor& a, const Tensor& b) { return binary(BinaryKind::kMul, "mul", a, b); }
Tensor div(const Tensor& a, const Tensor& b) { return binary(BinaryKind::kDiv, "div", a, b); }
Tensor neg(const Tensor& x) { return unary(UnaryKind::kNeg, "neg", x); }
Tensor add_scalar(const Tensor& x, double s) {
  return unary(UnaryKind::kAddScalar, "add_scalar", x, s);
}
Tensor mul_scalar(const Tensor& x, double s) {
  return unary(UnaryKind::kMulScalar, "mul_scalar", x, s);
}
Tensor pow_scalar(const Tensor& x, double p) {
  return unary(UnaryKind::kPowScalar, "pow_scalar", x, p);
}
Tensor exp(const Tensor& x) { return unary(UnaryKind::kExp, "exp", x); }
Tensor log(const Tensor& x) { return unary(UnaryKind::kLog, "log", x); }
Tensor sqrt(const Tensor& x) { return unary(UnaryKind::kSqrt, "sqrt", x); }
Tensor rsqrt(const Tensor& x) { return unary(UnaryKind::kRsqrt, "rsqrt", x); }
Tensor abs(const Tensor& x) { return unary(UnaryKind::kAbs, "abs", x); }
Tensor tanh(const Tensor& x) { return unary(UnaryKind::kTanh, "tanh", x); }
Tensor sigmoid(const Tensor& x) { return unary(UnaryKind::kSigmoid, "sigmoid", x); }
Tensor relu(const Tensor& x) { return unary(UnaryKind::kRelu, "relu", x); }
Tensor gelu_tanh(const Tensor& x) { return unary(UnaryKind::kGeluTanh, "gelu_tanh", x); }
Tensor gelu_erf(const Tensor& x) { return unary(UnaryKind::kGeluErf, "gelu_erf", x); }
Tensor silu(const Tensor& x) { return unary(UnaryKind::kSilu, "silu", x); }

}  // namespace patchbay::engine
