// Plain references of the fused bias + activation (bias_activation.hpp): double precision,
// std::tanh, one thread.
#include <cmath>
#include <vector>

#include "patchbay/kernels/bias_activation.hpp"

namespace patchbay::kernels {
namespace {

constexpr double kSqrt2OverPi = 0.7978845608028654;
constexpr double kCubic = 0.044715;

double activation(BiasActivationKind kind, double z) {
  if (kind == BiasActivationKind::kRelu) return z > 0 ? z : 0;
  return 0.5 * z * (1.0 + std::tanh(kSqrt2OverPi * (z + kCubic * z * z * z)));
}

double derivative(BiasActivationKind kind, double z) {
  if (kind == BiasActivationKind::kRelu) return z > 0 ? 1 : 0;
  const double t = std::tanh(kSqrt2OverPi * (z + kCubic * z * z * z));
  const double du = kSqrt2OverPi * (1.0 + 3.0 * kCubic * z * z);
  return 0.5 * (1.0 + t) + 0.5 * z * (1.0 - t * t) * du;
}

}  // namespace

void bias_activation_reference_forward(BiasActivationKind kind, const float* x, const float* bias,
                                       float* y, std::int64_t rows, std::int64_t cols) {
  for (std::int64_t r = 0; r < rows; ++r)
    for (std::int64_t c = 0; c < cols; ++c) {
      const double z = static_cast<double>(x[r * cols + c]) + static_cast<double>(bias[c]);
      y[r * cols + c] = static_cast<float>(activation(kind, z));
    }
}

void bias_activation_reference_backward(BiasActivationKind kind, const float* x, const float* bias,
                                        const float* g, float* dx, float* dbias, std::int64_t rows,
                                        std::int64_t cols) {
  std::vector<double> sums(static_cast<size_t>(cols), 0.0);
  for (std::int64_t r = 0; r < rows; ++r)
    for (std::int64_t c = 0; c < cols; ++c) {
      const double z = static_cast<double>(x[r * cols + c]) + static_cast<double>(bias[c]);
      const double d = static_cast<double>(g[r * cols + c]) * derivative(kind, z);
      dx[r * cols + c] = static_cast<float>(d);
      sums[static_cast<size_t>(c)] += d;
    }
  if (dbias != nullptr)
    for (std::int64_t c = 0; c < cols; ++c) dbias[c] = static_cast<float>(sums[static_cast<size_t>(c)]);
}

}  // namespace patchbay::kernels
