// Welford's running mean and variance, and Chan et al.'s merge of two partial states: how the
// norm kernels combine per-thread statistics across a warp and a block without the
// cancellation of sum(x^2) - sum(x)^2. count is kept in T so merges need no conversions.
#pragma once

#include "patchbay/kernels/cuda/math/host_device.hpp"

namespace patchbay::kernels::cuda::math {

template <class T>
struct WelfordState {
  T count = T(0);
  T mean = T(0);
  T m2 = T(0);  // sum of squared deviations from mean
};

template <class T>
PATCHBAY_HD WelfordState<T> welford_add(WelfordState<T> s, T x) {
  s.count += T(1);
  const T delta = x - s.mean;
  s.mean += delta / s.count;
  s.m2 += delta * (x - s.mean);
  return s;
}

// The state of the union of the two samples (either may be empty).
template <class T>
PATCHBAY_HD WelfordState<T> welford_merge(WelfordState<T> a, WelfordState<T> b) {
  const T count = a.count + b.count;
  if (count == T(0)) return a;
  const T delta = b.mean - a.mean;
  const T b_share = b.count / count;
  WelfordState<T> merged;
  merged.count = count;
  merged.mean = a.mean + delta * b_share;
  merged.m2 = a.m2 + b.m2 + delta * delta * a.count * b_share;
  return merged;
}

// Population variance (divide by n), what layer norm uses; 0 for an empty state.
template <class T>
PATCHBAY_HD T welford_variance(WelfordState<T> s) {
  return s.count > T(0) ? s.m2 / s.count : T(0);
}

}  // namespace patchbay::kernels::cuda::math
