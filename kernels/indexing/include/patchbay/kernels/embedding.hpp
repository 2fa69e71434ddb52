// Embedding gather: each id selects one row of a weight table. Forward copies rows;
// backward scatter-adds output gradients into the weight gradient (ids that repeat add up).
//
// Layouts (row-major, contiguous, f32):
//   weights      [vocab, dim]
//   ids          [count]          (any ids shape, flattened; int32_t or int64_t)
//   out          [count, dim]
// Precondition: every id lies in [0, vocab). Check with first_index_out_of_range
// (index_check.hpp); these kernels do not check.
// Thread safety: pure functions of their arguments; output buffers must not alias inputs.
#pragma once

#include <cstdint>

namespace patchbay::kernels {

// out[t, :] = weights[ids[t], :]. out is overwritten.
template <class Index>
void embedding_forward(const float* weights, int64_t vocab, int64_t dim, const Index* ids,
                       int64_t count, float* out);

// grad_weights[ids[t], :] += grad_out[t, :] for every t. grad_weights [vocab, dim] is
// accumulated into (zero it first for a fresh gradient). Deterministic: each weight row
// receives its contributions in token order whatever the thread count.
template <class Index>
void embedding_backward(const float* grad_out, const Index* ids, int64_t count, int64_t vocab,
                        int64_t dim, float* grad_weights);

// Plain single-threaded references with the same contracts, for tests.
template <class Index>
void embedding_forward_reference(const float* weights, int64_t vocab, int64_t dim, const Index* ids,
                                 int64_t count, float* out);
template <class Index>
void embedding_backward_reference(const float* grad_out, const Index* ids, int64_t count,
                                  int64_t vocab, int64_t dim, float* grad_weights);

}  // namespace patchbay::kernels
