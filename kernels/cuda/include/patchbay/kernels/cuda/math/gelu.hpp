// GELU and its derivative, in the tanh approximation (GPT-2's, the CPU kernels' default) and
// the exact erf form, for float (kernels) and double (CPU twins). Same formulas as
// kernels/cpu/bias_activation_reference.cpp:
//   tanh: 0.5 x (1 + tanh(u)), u = sqrt(2/pi) (x + 0.044715 x^3)
//         d/dx = 0.5 (1 + t) + 0.5 x (1 - t^2) sqrt(2/pi) (1 + 3 * 0.044715 x^2), t = tanh(u)
//   erf:  0.5 x (1 + erf(x / sqrt 2));  d/dx = 0.5 (1 + erf(x / sqrt 2)) + x phi(x)
#pragma once

#include <cmath>

#include "patchbay/kernels/cuda/math/host_device.hpp"

namespace patchbay::kernels::cuda::math {

namespace detail {
PATCHBAY_HD float tanh_of(float x) { return tanhf(x); }
PATCHBAY_HD double tanh_of(double x) { return tanh(x); }
PATCHBAY_HD float erf_of(float x) { return erff(x); }
PATCHBAY_HD double erf_of(double x) { return erf(x); }
PATCHBAY_HD float exp_of(float x) { return expf(x); }
PATCHBAY_HD double exp_of(double x) { return exp(x); }
}  // namespace detail

template <class T>
PATCHBAY_HD T gelu_tanh(T x) {
  const T u = T(0.7978845608028654) * (x + T(0.044715) * x * x * x);
  return T(0.5) * x * (T(1) + detail::tanh_of(u));
}

template <class T>
PATCHBAY_HD T gelu_tanh_derivative(T x) {
  const T t = detail::tanh_of(T(0.7978845608028654) * (x + T(0.044715) * x * x * x));
  const T du = T(0.7978845608028654) * (T(1) + T(3 * 0.044715) * x * x);
  return T(0.5) * (T(1) + t) + T(0.5) * x * (T(1) - t * t) * du;
}

template <class T>
PATCHBAY_HD T gelu_erf(T x) {
  return T(0.5) * x * (T(1) + detail::erf_of(x * T(0.7071067811865476)));
}

template <class T>
PATCHBAY_HD T gelu_erf_derivative(T x) {
  const T cdf = T(0.5) * (T(1) + detail::erf_of(x * T(0.7071067811865476)));
  const T pdf = T(0.3989422804014327) * detail::exp_of(T(-0.5) * x * x);
  return cdf + x * pdf;
}

enum class Activation : int { kGeluTanh = 0, kGeluErf = 1, kRelu = 2, kNone = 3 };

template <class T>
PATCHBAY_HD T activate(Activation kind, T x) {
  switch (kind) {
    case Activation::kGeluTanh:
      return gelu_tanh(x);
    case Activation::kGeluErf:
      return gelu_erf(x);
    case Activation::kRelu:
      return x > T(0) ? x : T(0);
    default:
      return x;
  }
}

template <class T>
PATCHBAY_HD T activate_derivative(Activation kind, T x) {
  switch (kind) {
    case Activation::kGeluTanh:
      return gelu_tanh_derivative(x);
    case Activation::kGeluErf:
      return gelu_erf_derivative(x);
    case Activation::kRelu:
      return x > T(0) ? T(1) : T(0);
    default:
      return T(1);
  }
}

}  // namespace patchbay::kernels::cuda::math
