// CPU twins of the bias + activation kernels, in double (bias_activation_reference.hpp).
#include "patchbay/kernels/cuda/bias_activation_reference.hpp"

#include <vector>

namespace patchbay::kernels::cuda {

void bias_activation_forward_reference(math::Activation kind, const float* x, const float* bias,
                                       float* y, int64_t rows, int64_t cols) {
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t c = 0; c < cols; ++c) {
      const double z = double(x[r * cols + c]) + (bias != nullptr ? double(bias[c]) : 0.0);
      y[r * cols + c] = static_cast<float>(math::activate(kind, z));
    }
}

void bias_activation_backward_reference(math::Activation kind, const float* x, const float* bias,
                                        const float* dy, float* dx, float* dbias, int64_t rows,
                                        int64_t cols) {
  std::vector<double> sums(static_cast<size_t>(cols), 0.0);
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t c = 0; c < cols; ++c) {
      const double z = double(x[r * cols + c]) + (bias != nullptr ? double(bias[c]) : 0.0);
      const double d = double(dy[r * cols + c]) * math::activate_derivative(kind, z);
      dx[r * cols + c] = static_cast<float>(d);
      sums[static_cast<size_t>(c)] += d;
    }
  if (dbias != nullptr)
    for (int64_t c = 0; c < cols; ++c) dbias[c] = static_cast<float>(sums[static_cast<size_t>(c)]);
}

void column_sum_f32_reference(const float* in, float* out, int64_t rows, int64_t cols) {
  for (int64_t c = 0; c < cols; ++c) {
    double sum = 0.0;
    for (int64_t r = 0; r < rows; ++r) sum += in[r * cols + c];
    out[c] = static_cast<float>(sum);
  }
}

}  // namespace patchbay::kernels::cuda
