// CPU twins of embedding_rotary.hpp.
#pragma once

#include <cstdint>

namespace patchbay::kernels::cuda {

template <class Index>
void embedding_forward_reference(const Index* ids, const float* weight, float* out, int64_t count,
                                 int64_t vocab, int64_t dim);
template <class Index>
void embedding_backward_reference(const Index* ids, const float* dout, float* dweight,
                                  int64_t count, int64_t vocab, int64_t dim);
void rotary_embedding_reference(const float* x, float* out, int64_t rows, int64_t steps,
                                int64_t dim, int64_t position_offset, double theta, bool inverse);

}  // namespace patchbay::kernels::cuda
