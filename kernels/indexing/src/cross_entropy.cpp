// Cross-entropy kernels and references (see cross_entropy.hpp for shapes and formulas).
// Rows are independent: threads split rows. Within a row, one pass finds the max, a second
// sums exp(z - max) in double (float exponentials, double accumulation: with 50k classes a
// float sum would lose ~3 digits), and the sum of logits for the smoothing term is
// accumulated in the same pass.
#include "patchbay/kernels/cross_entropy.hpp"

#include <algorithm>
#include <cmath>
#include <limits>

namespace patchbay::kernels {
namespace {

bool is_ignored(int64_t target, const CrossEntropyOptions& options) {
  return target == options.ignore_index;
}

// Threads pay off once a call touches ~32k logits.
bool worth_threads(int64_t rows, int64_t classes) { return rows > 1 && rows * classes > 32768; }

}  // namespace

template <class Index>
int64_t first_invalid_target(const Index* targets, int64_t rows, int64_t classes,
                             int64_t ignore_index) {
  for (int64_t r = 0; r < rows; ++r) {
    const auto t = static_cast<int64_t>(targets[r]);
    if (t != ignore_index && (t < 0 || t >= classes)) return r;
  }
  return -1;
}

template <class Index>
int64_t cross_entropy_forward(const float* logits, const Index* targets, int64_t rows,
                              int64_t classes, const CrossEntropyOptions& options,
                              float* row_loss, float* row_logsumexp) {
  const double smoothing = options.label_smoothing;
  int64_t counted = 0;
#pragma omp parallel for schedule(static) reduction(+ : counted) if (worth_threads(rows, classes))
  for (int64_t r = 0; r < rows; ++r) {
    const auto target = static_cast<int64_t>(targets[r]);
    if (is_ignored(target, options)) {
      row_loss[r] = 0.0f;
      row_logsumexp[r] = 0.0f;
      continue;
    }
    const float* z = logits + r * classes;
    float max_logit = -std::numeric_limits<float>::infinity();
    for (int64_t j = 0; j < classes; ++j) max_logit = std::max(max_logit, z[j]);
    double sum_exp = 0.0;
    double sum_logits = 0.0;
    for (int64_t j = 0; j < classes; ++j) {
      sum_exp += static_cast<double>(std::exp(z[j] - max_logit));
      sum_logits += z[j];
    }
    const double lse = static_cast<double>(max_logit) + std::log(sum_exp);
    const double nll = lse - z[target];
    const double uniform = lse - sum_logits / static_cast<double>(classes);
    row_loss[r] = static_cast<float>((1.0 - smoothing) * nll + smoothing * uniform);
    row_logsumexp[r] = static_cast<float>(lse);
    ++counted;
  }
  return counted;
}

template <class Index>
void cross_entropy_backward(const float* logits, const Index* targets,
                            const float* row_logsumexp, const float* row_grad, int64_t rows,
                            int64_t classes, const CrossEntropyOptions& options,
                            float* grad_logits) {
  const float smoothing = options.label_smoothing;
  const float uniform_share = smoothing / static_cast<float>(classes);
#pragma omp parallel for schedule(static) if (worth_threads(rows, classes))
  for (int64_t r = 0; r < rows; ++r) {
    float* g = grad_logits + r * classes;
    const auto target = static_cast<int64_t>(targets[r]);
    if (is_ignored(target, options)) {
      std::fill(g, g + classes, 0.0f);
      continue;
    }
    const float* z = logits + r * classes;
    const float lse = row_logsumexp[r];
    const float scale = row_grad[r];
    for (int64_t j = 0; j < classes; ++j) g[j] = scale * (std::exp(z[j] - lse) - uniform_share);
    g[target] -= scale * (1.0f - smoothing);
  }
}

template <class Index>
int64_t cross_entropy_forward_reference(const float* logits, const Index* targets,
                                        int64_t rows, int64_t classes,
                                        const CrossEntropyOptions& options, float* row_loss,
                                        float* row_logsumexp) {
  const double eps = options.label_smoothing;
  int64_t counted = 0;
  for (int64_t r = 0; r < rows; ++r) {
    const auto target = static_cast<int64_t>(targets[r]);
    row_loss[r] = 0.0f;
    row_logsumexp[r] = 0.0f;
    if (target == options.ignore_index) continue;
    const float* z = logits + r * classes;
    double max_logit = z[0];
    for (int64_t j = 1; j < classes; ++j) max_logit = std::max(max_logit, double(z[j]));
    double sum_exp = 0.0;
    for (int64_t j = 0; j < classes; ++j) sum_exp += std::exp(double(z[j]) - max_logit);
    const double lse = max_logit + std::log(sum_exp);
    // Σ_j q_j · (−log p_j) with q = (1−ε)·onehot + ε/classes, written out term by term.
    double loss = 0.0;
    for (int64_t j = 0; j < classes; ++j) {
      const double q = (j == target ? 1.0 - eps : 0.0) + eps / double(classes);
      loss += q * (lse - double(z[j]));
    }
    row_loss[r] = static_cast<float>(loss);
    row_logsumexp[r] = static_cast<float>(lse);
    ++counted;
  }
  return counted;
}

template <class Index>
void cross_entropy_backward_reference(const float* logits, const Index* targets,
                                      const float* row_grad, int64_t rows, int64_t classes,
                                      const CrossEntropyOptions& options, float* grad_logits) {
  const double eps = options.label_smoothing;
  for (int64_t r = 0; r < rows; ++r) {
    const auto target = static_cast<int64_t>(targets[r]);
    float* g = grad_logits + r * classes;
    if (target == options.ignore_index) {
      for (int64_t j = 0; j < classes; ++j) g[j] = 0.0f;
      continue;
    }
    const float* z = logits + r * classes;
    double max_logit = z[0];
    for (int64_t j = 1; j < classes; ++j) max_logit = std::max(max_logit, double(z[j]));
    double sum_exp = 0.0;
    for (int64_t j = 0; j < classes; ++j) sum_exp += std::exp(double(z[j]) - max_logit);
    for (int64_t j = 0; j < classes; ++j) {
      const double p = std::exp(double(z[j]) - max_logit) / sum_exp;
      const double q = (j == target ? 1.0 - eps : 0.0) + eps / double(classes);
      g[j] = static_cast<float>(double(row_grad[r]) * (p - q));
    }
  }
}

#define PATCHBAY_INSTANTIATE_CROSS_ENTROPY(Index)                                              \
  template int64_t first_invalid_target<Index>(const Index*, int64_t, int64_t, int64_t);       \
  template int64_t cross_entropy_forward<Index>(const float*, const Index*, int64_t, int64_t,  \
                                                const CrossEntropyOptions&, float*, float*);   \
  template void cross_entropy_backward<Index>(const float*, const Index*, const float*,        \
                                              const float*, int64_t, int64_t,                  \
                                              const CrossEntropyOptions&, float*);             \
  template int64_t cross_entropy_forward_reference<Index>(                                     \
      const float*, const Index*, int64_t, int64_t, const CrossEntropyOptions&, float*, float*); \
  template void cross_entropy_backward_reference<Index>(const float*, const Index*,            \
                                                        const float*, int64_t, int64_t,        \
                                                        const CrossEntropyOptions&, float*);
PATCHBAY_INSTANTIATE_CROSS_ENTROPY(int32_t)
PATCHBAY_INSTANTIATE_CROSS_ENTROPY(int64_t)
#undef PATCHBAY_INSTANTIATE_CROSS_ENTROPY

}  // namespace patchbay::kernels
