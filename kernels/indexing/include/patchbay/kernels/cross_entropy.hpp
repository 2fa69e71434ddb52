// Cross-entropy of logits against integer class targets, with ignore_index and label
// smoothing (PyTorch nn.CrossEntropyLoss semantics).
//
// Layouts (row-major, contiguous, f32):
//   logits         [rows, classes]
//   targets        [rows]            int32_t or int64_t; each in [0, classes) or ignore_index
//   row_loss       [rows]            per-row loss, 0 for ignored rows
//   row_logsumexp  [rows]            log Σ_j exp(logits[r, j]); saved for the backward pass
//   row_grad       [rows]            d(objective)/d(row_loss[r]); for the mean loss this is
//                                    upstream / count on every row
//   grad_logits    [rows, classes]
//
// Per-row loss with smoothing ε and lse = log Σ_j exp(z_j):
//   loss_r = (1 - ε)·(lse - z_t) + ε·(lse - mean_j z_j)
// which is (1 - ε)·NLL + ε·(uniform-target cross-entropy). Its gradient:
//   d loss_r / d z_j = softmax_j - (1 - ε)·[j == t] - ε / classes
// The mean loss is Σ_r row_loss[r] / count over rows not ignored; with count == 0 it is
// 0/0 = NaN, as in PyTorch (callers that sum losses over batches should use row_loss and
// the count instead).
// lse is computed stably (max subtracted; exponentials summed in float blocks of 512 and
// across blocks in double), so logits of any magnitude give finite results.
// Precondition: targets are valid (check with first_invalid_target); the kernels do not
// check. Thread safety: pure functions; outputs must not alias inputs.
#pragma once

#include <cstdint>

namespace patchbay::kernels {

inline constexpr int64_t kDefaultIgnoreIndex = -100;

struct CrossEntropyOptions {
  int64_t ignore_index = kDefaultIgnoreIndex;  // rows with this target contribute nothing
  float label_smoothing = 0.0f;                // ε in [0, 1]
};

// Position of the first target that is neither in [0, classes) nor ignore_index, or -1.
template <class Index>
int64_t first_invalid_target(const Index* targets, int64_t rows, int64_t classes,
                             int64_t ignore_index);

// Writes row_loss and row_logsumexp (both overwritten; 0 on ignored rows) and returns the
// number of rows not ignored.
template <class Index>
int64_t cross_entropy_forward(const float* logits, const Index* targets, int64_t rows,
                              int64_t classes, const CrossEntropyOptions& options, float* row_loss,
                              float* row_logsumexp);

// grad_logits (overwritten) = row_grad[r] · (softmax - (1-ε)·onehot - ε/classes) on rows
// not ignored, 0 on ignored rows. row_logsumexp comes from cross_entropy_forward.
template <class Index>
void cross_entropy_backward(const float* logits, const Index* targets, const float* row_logsumexp,
                            const float* row_grad, int64_t rows, int64_t classes,
                            const CrossEntropyOptions& options, float* grad_logits);

// Plain references (double precision throughout, single-threaded), same contracts.
template <class Index>
int64_t cross_entropy_forward_reference(const float* logits, const Index* targets, int64_t rows,
                                        int64_t classes, const CrossEntropyOptions& options,
                                        float* row_loss, float* row_logsumexp);
template <class Index>
void cross_entropy_backward_reference(const float* logits, const Index* targets,
                                      const float* row_grad, int64_t rows, int64_t classes,
                                      const CrossEntropyOptions& options, float* grad_logits);

}  // namespace patchbay::kernels
