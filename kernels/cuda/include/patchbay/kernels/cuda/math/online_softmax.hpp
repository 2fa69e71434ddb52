// The online softmax normaliser (Milakov & Gimelshein 2018): a running maximum and the sum of
// exp(x - max), updated one value at a time and merged across threads; how softmax,
// cross-entropy and flash attention find logsumexp in one pass. -inf inputs contribute
// nothing; a state that has seen only -inf has max = -inf and sum = 0.
#pragma once

#include <cmath>

#include "patchbay/kernels/cuda/math/host_device.hpp"

namespace patchbay::kernels::cuda::math {

namespace detail {
PATCHBAY_HD float softmax_exp(float x) { return expf(x); }
PATCHBAY_HD double softmax_exp(double x) { return exp(x); }
PATCHBAY_HD float softmax_log(float x) { return logf(x); }
PATCHBAY_HD double softmax_log(double x) { return log(x); }
}  // namespace detail

template <class T>
struct SoftmaxState {
  T max = -T(INFINITY);
  T sum = T(0);  // sum of exp(x - max)
};

template <class T>
PATCHBAY_HD SoftmaxState<T> softmax_add(SoftmaxState<T> s, T x) {
  if (x == -T(INFINITY)) return s;
  if (x > s.max) {
    s.sum = s.sum * detail::softmax_exp(s.max - x) + T(1);  // exp(-inf) = 0 when s was empty
    s.max = x;
  } else {
    s.sum += detail::softmax_exp(x - s.max);
  }
  return s;
}

template <class T>
PATCHBAY_HD SoftmaxState<T> softmax_merge(SoftmaxState<T> a, SoftmaxState<T> b) {
  const T max = a.max > b.max ? a.max : b.max;
  if (max == -T(INFINITY)) return a;
  SoftmaxState<T> merged;
  merged.max = max;
  merged.sum = a.sum * detail::softmax_exp(a.max - max) + b.sum * detail::softmax_exp(b.max - max);
  return merged;
}

// log(sum exp(x)) of everything added; -inf for an empty state.
template <class T>
PATCHBAY_HD T softmax_logsumexp(SoftmaxState<T> s) {
  return s.max + detail::softmax_log(s.sum);
}

}  // namespace patchbay::kernels::cuda::math
