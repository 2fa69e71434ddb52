// The engine's unary element-wise ops (core/engine/ops/elementwise.cpp: neg, abs, exp, log,
// sqrt, rsqrt, tanh, sigmoid, relu, GELU tanh/erf, SiLU, add/mul/pow by a scalar) and their
// derivatives, in f32 with the CPU kernel's formulas, shared by the CUDA kernel and its twin.
#pragma once

#include <cmath>

#include "patchbay/kernels/cuda/math/host_device.hpp"

namespace patchbay::kernels::cuda::math {

enum class UnaryOp : int {
  kNeg,
  kAbs,
  kExp,
  kLog,
  kSqrt,
  kRsqrt,
  kTanh,
  kSigmoid,
  kRelu,
  kGeluTanh,
  kGeluErf,
  kSilu,
  kAddScalar,
  kMulScalar,
  kPowScalar
};

namespace detail {
constexpr float kSqrt2OverPi = 0.7978845608028654f;
constexpr float kInvSqrt2 = 0.7071067811865476f;
}  // namespace detail

// op(x); s is the scalar of the *Scalar ops.
PATCHBAY_HD float unary_value(UnaryOp op, float s, float x) {
  switch (op) {
    case UnaryOp::kNeg:
      return -x;
    case UnaryOp::kAbs:
      return fabsf(x);
    case UnaryOp::kExp:
      return expf(x);
    case UnaryOp::kLog:
      return logf(x);
    case UnaryOp::kSqrt:
      return sqrtf(x);
    case UnaryOp::kRsqrt:
      return 1.0f / sqrtf(x);
    case UnaryOp::kTanh:
      return tanhf(x);
    case UnaryOp::kSigmoid:
      return 1.0f / (1.0f + expf(-x));
    case UnaryOp::kRelu:
      return x > 0.0f ? x : 0.0f;
    case UnaryOp::kGeluTanh:
      return 0.5f * x * (1.0f + tanhf(detail::kSqrt2OverPi * (x + 0.044715f * x * x * x)));
    case UnaryOp::kGeluErf:
      return 0.5f * x * (1.0f + erff(x * detail::kInvSqrt2));
    case UnaryOp::kSilu:
      return x / (1.0f + expf(-x));
    case UnaryOp::kAddScalar:
      return x + s;
    case UnaryOp::kMulScalar:
      return x * s;
    case UnaryOp::kPowScalar:
      return powf(x, s);
  }
  return 0.0f;
}

// d op(x) / dx.
PATCHBAY_HD float unary_derivative(UnaryOp op, float s, float x) {
  switch (op) {
    case UnaryOp::kNeg:
      return -1.0f;
    case UnaryOp::kAbs:
      return x > 0.0f ? 1.0f : (x < 0.0f ? -1.0f : 0.0f);
    case UnaryOp::kExp:
      return expf(x);
    case UnaryOp::kLog:
      return 1.0f / x;
    case UnaryOp::kSqrt:
      return 0.5f / sqrtf(x);
    case UnaryOp::kRsqrt:
      return -0.5f / (x * sqrtf(x));
    case UnaryOp::kTanh: {
      const float t = tanhf(x);
      return 1.0f - t * t;
    }
    case UnaryOp::kSigmoid: {
      const float g = 1.0f / (1.0f + expf(-x));
      return g * (1.0f - g);
    }
    case UnaryOp::kRelu:
      return x > 0.0f ? 1.0f : 0.0f;
    case UnaryOp::kGeluTanh: {
      const float u = detail::kSqrt2OverPi * (x + 0.044715f * x * x * x);
      const float t = tanhf(u);
      const float du = detail::kSqrt2OverPi * (1.0f + 3.0f * 0.044715f * x * x);
      return 0.5f * (1.0f + t) + 0.5f * x * (1.0f - t * t) * du;
    }
    case UnaryOp::kGeluErf:
      return 0.5f * (1.0f + erff(x * detail::kInvSqrt2)) +
             x * 0.3989422804014327f * expf(-0.5f * x * x);
    case UnaryOp::kSilu: {
      const float g = 1.0f / (1.0f + expf(-x));
      return g * (1.0f + x * (1.0f - g));
    }
    case UnaryOp::kAddScalar:
      return 1.0f;
    case UnaryOp::kMulScalar:
      return s;
    case UnaryOp::kPowScalar:
      return s == 0.0f ? 0.0f : s * powf(x, s - 1.0f);
  }
  return 0.0f;
}

}  // namespace patchbay::kernels::cuda::math
