// CPU twins of the norm kernels (normalization_reference.hpp): two-pass statistics in double.
#include "patchbay/kernels/cuda/normalization_reference.hpp"

#include <cmath>
#include <vector>

namespace patchbay::kernels::cuda {
namespace {

void row_statistics(const float* row, int64_t cols, float eps, float& mean_out, float& rstd_out) {
  double mean = 0.0;
  for (int64_t c = 0; c < cols; ++c) mean += row[c];
  mean /= double(cols);
  double variance = 0.0;
  for (int64_t c = 0; c < cols; ++c) variance += (row[c] - mean) * (row[c] - mean);
  variance /= double(cols);
  mean_out = static_cast<float>(mean);
  rstd_out = static_cast<float>(1.0 / std::sqrt(variance + double(eps)));
}

// dx and the parameter sums of a norm whose row is xhat = (x - mean) * rstd (mean = 0 for RMS).
void norm_backward(const float* x, const float* gamma, const float* mean, const float* rstd,
                   const float* dy, const float* dresidual, float* dx, float* dgamma, float* dbeta,
                   int64_t rows, int64_t cols, bool rms) {
  std::vector<double> sum_gamma(static_cast<size_t>(cols), 0.0), sum_beta(sum_gamma);
  for (int64_t r = 0; r < rows; ++r) {
    const double mu = rms ? 0.0 : double(mean[r]), rs = rstd[r];
    double mean_g = 0.0, mean_gx = 0.0;
    for (int64_t c = 0; c < cols; ++c) {
      const double g = double(dy[r * cols + c]) * gamma[c];
      const double xhat = (x[r * cols + c] - mu) * rs;
      mean_g += g;
      mean_gx += g * xhat;
      sum_gamma[size_t(c)] += double(dy[r * cols + c]) * xhat;
      sum_beta[size_t(c)] += dy[r * cols + c];
    }
    mean_g = rms ? 0.0 : mean_g / double(cols);
    mean_gx /= double(cols);
    for (int64_t c = 0; c < cols; ++c) {
      const double xhat = (x[r * cols + c] - mu) * rs;
      double d = rs * (double(dy[r * cols + c]) * gamma[c] - mean_g - xhat * mean_gx);
      if (dresidual != nullptr) d += dresidual[r * cols + c];
      dx[r * cols + c] = static_cast<float>(d);
    }
  }
  for (int64_t c = 0; c < cols; ++c) {
    if (dgamma != nullptr) dgamma[c] = static_cast<float>(sum_gamma[size_t(c)]);
    if (dbeta != nullptr) dbeta[c] = static_cast<float>(sum_beta[size_t(c)]);
  }
}

}  // namespace

void layer_norm_forward_reference(const float* x, const float* gamma, const float* beta, float* y,
                                  float* mean, float* rstd, int64_t rows, int64_t cols, float eps) {
  for (int64_t r = 0; r < rows; ++r) {
    row_statistics(x + r * cols, cols, eps, mean[r], rstd[r]);
    for (int64_t c = 0; c < cols; ++c) {
      const double xhat = (double(x[r * cols + c]) - mean[r]) * rstd[r];
      y[r * cols + c] = static_cast<float>(xhat * gamma[c] + (beta != nullptr ? beta[c] : 0.0f));
    }
  }
}

void residual_layer_norm_forward_reference(const float* a, const float* b, const float* gamma,
                                           const float* beta, float* residual_out, float* y,
                                           float* mean, float* rstd, int64_t rows, int64_t cols,
                                           float eps) {
  for (int64_t i = 0; i < rows * cols; ++i) residual_out[i] = a[i] + b[i];
  layer_norm_forward_reference(residual_out, gamma, beta, y, mean, rstd, rows, cols, eps);
}

void layer_norm_backward_reference(const float* x, const float* gamma, const float* mean,
                                   const float* rstd, const float* dy, const float* dresidual,
                                   float* dx, float* dgamma, float* dbeta, int64_t rows,
                                   int64_t cols) {
  norm_backward(x, gamma, mean, rstd, dy, dresidual, dx, dgamma, dbeta, rows, cols, false);
}

void rms_norm_forward_reference(const float* x, const float* gamma, float* y, float* rstd,
                                int64_t rows, int64_t cols, float eps) {
  for (int64_t r = 0; r < rows; ++r) {
    double sum_squares = 0.0;
    for (int64_t c = 0; c < cols; ++c) sum_squares += double(x[r * cols + c]) * x[r * cols + c];
    rstd[r] = static_cast<float>(1.0 / std::sqrt(sum_squares / double(cols) + double(eps)));
    for (int64_t c = 0; c < cols; ++c)
      y[r * cols + c] = static_cast<float>(double(x[r * cols + c]) * rstd[r] * gamma[c]);
  }
}

void rms_norm_backward_reference(const float* x, const float* gamma, const float* rstd,
                                 const float* dy, float* dx, float* dgamma, int64_t rows,
                                 int64_t cols) {
  norm_backward(x, gamma, nullptr, rstd, dy, nullptr, dx, dgamma, nullptr, rows, cols, true);
}

}  // namespace patchbay::kernels::cuda
