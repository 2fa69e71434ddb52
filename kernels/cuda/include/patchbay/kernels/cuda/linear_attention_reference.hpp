// CPU twin of linear_attention.hpp: the same chunked causal product (chunks of kLinearChunk,
// masked product within a chunk, running state across chunks, reverse sweeps for dv and dk),
// in f32 with the kernel's summation order per output (fused multiply-adds aside).
#pragma once

#include <cstdint>

namespace patchbay::kernels::cuda {

// out_l = sum_{j <= l} (a_l . b_j) c_j (reverse: j >= l); shapes as causal_product_f32.
void causal_product_f32_reference(const float* a, const float* b, const float* c, float* out,
                                  int64_t rows, int64_t length, int64_t a_dim, int64_t c_dim,
                                  bool reverse);
void causal_linear_attention_backward_f32_reference(const float* q, const float* k, const float* v,
                                                    const float* dout, float* dq, float* dk,
                                                    float* dv, int64_t rows, int64_t length,
                                                    int64_t key_dim, int64_t value_dim);

}  // namespace patchbay::kernels::cuda
