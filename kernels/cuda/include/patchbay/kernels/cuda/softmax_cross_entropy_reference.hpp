// CPU twins of softmax_cross_entropy.hpp, in double.
#pragma once

#include <cstdint>

namespace patchbay::kernels::cuda {

void softmax_forward_reference(const float* x, float* y, int64_t rows, int64_t cols);
void softmax_backward_reference(const float* y, const float* dy, float* dx, int64_t rows,
                                int64_t cols);
void log_softmax_forward_reference(const float* x, float* y, int64_t rows, int64_t cols);
void log_softmax_backward_reference(const float* y, const float* dy, float* dx, int64_t rows,
                                    int64_t cols);
void cross_entropy_forward_backward_reference(const float* logits, const int32_t* targets,
                                              float* losses, float* dlogits, int64_t rows,
                                              int64_t cols, int32_t ignore_index, float grad_scale);

// Twins of cross_entropy_rows_forward / _backward (int64 targets; the kernels' int32 and int64
// forms share one template).
void cross_entropy_rows_forward_reference(const float* logits, const int64_t* targets,
                                          float* row_loss, float* row_lse, int64_t rows,
                                          int64_t cols, int64_t ignore_index, float smoothing);
void cross_entropy_rows_backward_reference(const float* logits, const int64_t* targets,
                                           const float* row_grad, float* grad_logits, int64_t rows,
                                           int64_t cols, int64_t ignore_index, float smoothing);

}  // namespace patchbay::kernels::cuda
