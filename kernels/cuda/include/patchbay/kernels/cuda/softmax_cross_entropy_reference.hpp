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

}  // namespace patchbay::kernels::cuda
