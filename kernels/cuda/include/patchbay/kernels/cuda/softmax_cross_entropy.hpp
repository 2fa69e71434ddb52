// Row softmax and log-softmax (forward, backward) and cross-entropy fused with its gradient, over
// the last dimension of row-major f32 [rows x cols]. One block per row; the row's max and sum of
// exponentials come from one pass of the online softmax (math/online_softmax.hpp). A row of
// only -inf gives NaN (0/0), as PyTorch does. CPU twins: softmax_cross_entropy_reference.hpp.
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>

namespace patchbay::kernels::cuda {

// y = softmax(x) per row. y may alias x.
cudaError_t softmax_forward(const float* x, float* y, int64_t rows, int64_t cols,
                            cudaStream_t stream);

// dx = y * (dy - sum(dy * y)) per row (y: the forward's output). dx may alias dy.
cudaError_t softmax_backward(const float* y, const float* dy, float* dx, int64_t rows, int64_t cols,
                             cudaStream_t stream);

// y = log_softmax(x) = x - logsumexp(x) per row. y may alias x.
cudaError_t log_softmax_forward(const float* x, float* y, int64_t rows, int64_t cols,
                                cudaStream_t stream);

// dx = dy - exp(y) * sum(dy) per row (y: the forward's output). dx may alias dy.
cudaError_t log_softmax_backward(const float* y, const float* dy, float* dx, int64_t rows,
                                 int64_t cols, cudaStream_t stream);

// Per row r with target t = targets[r]: losses[r] = logsumexp(logits[r]) - logits[r, t]
// (0 when t == ignore_index), and, when dlogits is not null,
// dlogits[r] = (softmax(logits[r]) - onehot(t)) * grad_scale (all 0 for an ignored row).
// grad_scale is the loss's upstream gradient, e.g. 1 / (number of counted rows) for a mean.
// dlogits may alias logits (the gradient then replaces the logits in place, saving the
// vocabulary-sized buffer). Targets must lie in [0, cols) or equal ignore_index
// (callers check; an out-of-range target reads no memory and gives a NaN loss).
cudaError_t cross_entropy_forward_backward(const float* logits, const int32_t* targets,
                                           float* losses, float* dlogits, int64_t rows,
                                           int64_t cols, int32_t ignore_index, float grad_scale,
                                           cudaStream_t stream);

// Cross-entropy with the engine's contract (kernels/indexing cross_entropy.hpp, PyTorch's
// nn.CrossEntropyLoss with ignore_index and label smoothing eps): per row r, t = targets[r],
//   row_lse[r] = log sum_j exp(z_j),  row_loss[r] = (1 - eps)(lse - z_t) + eps (lse - mean_j z_j),
// both 0 on a row whose target is ignore_index. Targets lie in [0, cols) or equal ignore_index
// (callers check, on the device: index_checks.hpp); an out-of-range target reads nothing and
// gives a NaN row loss (and, backward, no on-target term). Outputs must not alias the logits.
cudaError_t cross_entropy_rows_forward(const float* logits, const int32_t* targets, float* row_loss,
                                       float* row_lse, int64_t rows, int64_t cols,
                                       int64_t ignore_index, float smoothing, cudaStream_t stream);
cudaError_t cross_entropy_rows_forward(const float* logits, const int64_t* targets, float* row_loss,
                                       float* row_lse, int64_t rows, int64_t cols,
                                       int64_t ignore_index, float smoothing, cudaStream_t stream);
// grad_logits[r, j] = row_grad[r] (softmax_j - (1 - eps)[j == t] - eps / cols), softmax from the
// saved row_lse; 0 on ignored rows. grad_logits is overwritten (it must not alias the logits).
cudaError_t cross_entropy_rows_backward(const float* logits, const int32_t* targets,
                                        const float* row_lse, const float* row_grad,
                                        float* grad_logits, int64_t rows, int64_t cols,
                                        int64_t ignore_index, float smoothing, cudaStream_t stream);
cudaError_t cross_entropy_rows_backward(const float* logits, const int64_t* targets,
                                        const float* row_lse, const float* row_grad,
                                        float* grad_logits, int64_t rows, int64_t cols,
                                        int64_t ignore_index, float smoothing, cudaStream_t stream);

}  // namespace patchbay::kernels::cuda
