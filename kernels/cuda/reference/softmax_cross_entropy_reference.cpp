// CPU twins of the softmax and cross-entropy kernels (softmax_cross_entropy_reference.hpp).
#include "patchbay/kernels/cuda/softmax_cross_entropy_reference.hpp"

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

}  // namespace patchbay::kernels::cuda
