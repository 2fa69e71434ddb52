// CPU twins of the softmax and cross-entropy kernels (softmax_cross_entropy_reference.hpp).
#include "patchbay/kernels/cuda/softmax_cross_entropy_reference.hpp"

#include <algorithm>
#include <cmath>
#include <limits>

namespace patchbay::kernels::cuda {
namespace {

// max and log(sum(exp(x - max))) of a row, in double.
void row_logsumexp(const float* row, int64_t cols, double& max, double& log_sum) {
  max = -std::numeric_limits<double>::infinity();
  for (int64_t c = 0; c < cols; ++c) max = std::fmax(max, double(row[c]));
  double sum = 0.0;
  for (int64_t c = 0; c < cols; ++c) sum += std::exp(double(row[c]) - max);
  log_sum = std::log(sum);
}

}  // namespace

void softmax_forward_reference(const float* x, float* y, int64_t rows, int64_t cols) {
  for (int64_t r = 0; r < rows; ++r) {
    double max, log_sum;
    row_logsumexp(x + r * cols, cols, max, log_sum);
    for (int64_t c = 0; c < cols; ++c)
      y[r * cols + c] = static_cast<float>(std::exp(double(x[r * cols + c]) - max - log_sum));
  }
}

void softmax_backward_reference(const float* y, const float* dy, float* dx, int64_t rows,
                                int64_t cols) {
  for (int64_t r = 0; r < rows; ++r) {
    double dot = 0.0;
    for (int64_t c = 0; c < cols; ++c) dot += double(dy[r * cols + c]) * y[r * cols + c];
    for (int64_t c = 0; c < cols; ++c)
      dx[r * cols + c] = static_cast<float>(double(y[r * cols + c]) * (dy[r * cols + c] - dot));
  }
}

void log_softmax_forward_reference(const float* x, float* y, int64_t rows, int64_t cols) {
  for (int64_t r = 0; r < rows; ++r) {
    double max, log_sum;
    row_logsumexp(x + r * cols, cols, max, log_sum);
    for (int64_t c = 0; c < cols; ++c)
      y[r * cols + c] = static_cast<float>(double(x[r * cols + c]) - max - log_sum);
  }
}

void log_softmax_backward_reference(const float* y, const float* dy, float* dx, int64_t rows,
                                    int64_t cols) {
  for (int64_t r = 0; r < rows; ++r) {
    double sum = 0.0;
    for (int64_t c = 0; c < cols; ++c) sum += dy[r * cols + c];
    for (int64_t c = 0; c < cols; ++c)
      dx[r * cols + c] =
          static_cast<float>(double(dy[r * cols + c]) - std::exp(double(y[r * cols + c])) * sum);
  }
}

void cross_entropy_forward_backward_reference(const float* logits, const int32_t* targets,
                                              float* losses, float* dlogits, int64_t rows,
                                              int64_t cols, int32_t ignore_index,
                                              float grad_scale) {
  for (int64_t r = 0; r < rows; ++r) {
    const float* row = logits + r * cols;
    const int32_t target = targets[r];
    if (target == ignore_index) {
      losses[r] = 0.0f;
      if (dlogits != nullptr)
        for (int64_t c = 0; c < cols; ++c) dlogits[r * cols + c] = 0.0f;
      continue;
    }
    double max, log_sum;
    row_logsumexp(row, cols, max, log_sum);
    losses[r] = static_cast<float>(max + log_sum - double(row[target]));
    if (dlogits != nullptr)
      for (int64_t c = 0; c < cols; ++c) {
        const double probability = std::exp(double(row[c]) - max - log_sum);
        dlogits[r * cols + c] =
            static_cast<float>((probability - (c == target ? 1.0 : 0.0)) * grad_scale);
      }
  }
}

namespace {
// log sum_j exp(z_j) of one row, in double.
double logsumexp_of(const float* z, int64_t cols) {
  double max = 0.0, log_sum = 0.0;
  row_logsumexp(z, cols, max, log_sum);
  return max + log_sum;
}
}  // namespace

void cross_entropy_rows_forward_reference(const float* logits, const int64_t* targets,
                                          float* row_loss, float* row_lse, int64_t rows,
                                          int64_t cols, int64_t ignore_index, float smoothing) {
  for (int64_t r = 0; r < rows; ++r) {
    const float* z = logits + r * cols;
    if (targets[r] == ignore_index) {
      row_loss[r] = row_lse[r] = 0.0f;
      continue;
    }
    const double lse = logsumexp_of(z, cols);
    double mean = 0.0;
    for (int64_t j = 0; j < cols; ++j) mean += z[j];
    mean /= static_cast<double>(cols);
    const double eps = smoothing;
    row_lse[r] = static_cast<float>(lse);
    row_loss[r] = static_cast<float>((1.0 - eps) * (lse - z[targets[r]]) + eps * (lse - mean));
  }
}

void cross_entropy_rows_backward_reference(const float* logits, const int64_t* targets,
                                           const float* row_grad, float* grad_logits, int64_t rows,
                                           int64_t cols, int64_t ignore_index, float smoothing) {
  for (int64_t r = 0; r < rows; ++r) {
    const float* z = logits + r * cols;
    float* g = grad_logits + r * cols;
    if (targets[r] == ignore_index) {
      std::fill(g, g + cols, 0.0f);
      continue;
    }
    const double lse = logsumexp_of(z, cols), eps = smoothing;
    for (int64_t j = 0; j < cols; ++j) {
      const double p = std::exp(static_cast<double>(z[j]) - lse);
      g[j] = static_cast<float>(row_grad[r] * (p - (j == targets[r] ? 1.0 - eps : 0.0) -
                                               eps / static_cast<double>(cols)));
    }
  }
}

}  // namespace patchbay::kernels::cuda
