// CPU twin of attention.hpp: the plain T x T causal attention per head, in double.
#pragma once

#include <cstdint>

namespace patchbay::kernels::cuda {

void causal_attention_forward_reference(const float* q, const float* k, const float* v, float* out,
                                        float* lse, int64_t batch_heads, int64_t steps,
                                        int64_t head_dim, float scale);

void causal_attention_backward_reference(const float* q, const float* k, const float* v,
                                         const float* dout, float* dq, float* dk, float* dv,
                                         int64_t batch_heads, int64_t steps, int64_t head_dim,
                                         float scale);

}  // namespace patchbay::kernels::cuda
