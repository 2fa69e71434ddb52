// Causal linear attention's numerator on the GPU (the engine op causal_linear_attention and its
// backward), f32, deterministic. CPU twin: linear_attention_reference.hpp.
//
// One kernel computes the "causal product" of three row-major sequences a, b [T, Ea], c [T, Mc]
//   out_l = sum_{j <= l} (a_l . b_j) c_j       (reverse: sum over j >= l)
// for `rows` independent sequences, in the chunked form of the CPU kernel
// (kernels/cpu/causal_linear_chunks.hpp): positions in chunks of kLinearChunk; within a chunk
// a masked product mask(A_c B_c^T) C_c, across chunks a running f32 state S = sum B_j^T C_j
// [Ea, Mc] read by A_c S. One block per (row, 32 columns of c), walking the chunks in order with
// its slice of S in shared memory: every sum has a fixed order (bit-reproducible runs), and
// out_l reads positions <= l only (causality exact, as on the CPU).
// The forward and all three gradients are this product (reverse = the same sweep from the end):
//   out = P(q, k, v),  dq = P(dout, v, k),  dv = Prev(k, q, dout),  dk = Prev(v, dout, q).
// Shared memory: (2 * kLinearChunk + 32) * Ea floats + small tiles; Ea up to
// linear_attention_max_key_dim() (the H100's 227 KiB opt-in per block).
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>

namespace patchbay::kernels::cuda {

constexpr int64_t kLinearChunk = 32;

// The largest Ea the kernel takes (shared memory per block).
int64_t linear_attention_max_key_dim();

// out [rows, T, Mc] (overwritten); a, b [rows, T, Ea], c [rows, T, Mc]; all contiguous f32.
cudaError_t causal_product_f32(const float* a, const float* b, const float* c, float* out,
                               int64_t rows, int64_t length, int64_t a_dim, int64_t c_dim,
                               bool reverse, cudaStream_t stream);

// The engine op: out = P(q, k, v); E = key_dim, M = value_dim.
cudaError_t causal_linear_attention_forward_f32(const float* q, const float* k, const float* v,
                                                float* out, int64_t rows, int64_t length,
                                                int64_t key_dim, int64_t value_dim,
                                                cudaStream_t stream);
// dq, dk [rows, T, E] and dv [rows, T, M] (overwritten) from dout [rows, T, M].
cudaError_t causal_linear_attention_backward_f32(const float* q, const float* k, const float* v,
                                                 const float* dout, float* dq, float* dk, float* dv,
                                                 int64_t rows, int64_t length, int64_t key_dim,
                                                 int64_t value_dim, cudaStream_t stream);

}  // namespace patchbay::kernels::cuda
