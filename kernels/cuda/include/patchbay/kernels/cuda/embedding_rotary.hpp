// Token embedding (forward gather, deterministic backward scatter-add) and rotary position
// embedding (forward; the backward is the inverse rotation). Row-major f32; ids int32 or int64.
// CPU twins: embedding_rotary_reference.hpp.
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>

namespace patchbay::kernels::cuda {

// out[n, :] = weight[ids[n], :] for n in [0, count); weight [vocab x dim]. Ids must lie in
// [0, vocab) (callers check; an out-of-range id writes a NaN row and reads nothing).
cudaError_t embedding_forward(const int32_t* ids, const float* weight, float* out, int64_t count,
                              int64_t vocab, int64_t dim, cudaStream_t stream);
cudaError_t embedding_forward(const int64_t* ids, const float* weight, float* out, int64_t count,
                              int64_t vocab, int64_t dim, cudaStream_t stream);

// dweight[ids[n], :] += dout[n, :] (accumulates, as the CPU's scatter-type backward passes do).
// Deterministic: every (row, column) of dweight is summed by one thread, in token order, with
// no atomics, so repeated tokens give the same bits every run. Out-of-range ids are skipped.
cudaError_t embedding_backward(const int32_t* ids, const float* dout, float* dweight, int64_t count,
                               int64_t vocab, int64_t dim, cudaStream_t stream);
cudaError_t embedding_backward(const int64_t* ids, const float* dout, float* dweight, int64_t count,
                               int64_t vocab, int64_t dim, cudaStream_t stream);

// Rotary embedding of x viewed as [rows, steps, dim] (dim even; the half-split pairing of the
// CPU engine's rotary_embedding: element i pairs with i + dim/2), position = position_offset +
// step, angle = position * theta^(-2i/dim) (computed in double, rounded to f32, as the CPU
// tabulates it). inverse rotates by -angle: the backward. out may alias x.
cudaError_t rotary_embedding(const float* x, float* out, int64_t rows, int64_t steps, int64_t dim,
                             int64_t position_offset, double theta, bool inverse,
                             cudaStream_t stream);

}  // namespace patchbay::kernels::cuda
