// CPU twin of the bf16 tensor-core flash attention (attention_bf16.hpp): the kernels' tiling
// (64-row blocks, 64-row tiles, tile-aligned causal and segment skipping), online softmax and
// rounding points, row by row on the CPU through the same math/flash_bf16.hpp functions; f32
// sums in index order where the tensor cores sum in their own order (the only difference).
// Same arguments and layouts as the kernels (bf16 as raw uint16 patterns).
#pragma once

#include <cstdint>

namespace patchbay::kernels::cuda {

void causal_attention_bf16_forward_twin(const uint16_t* q, const uint16_t* k, const uint16_t* v,
                                        float* out, float* lse, int64_t batch_heads, int64_t steps,
                                        int64_t head_dim, float scale,
                                        const int32_t* segments = nullptr, int64_t heads = 1);

// dq, dk, dv (f32) overwritten; out and lse as the forward twin (or the kernel) left them.
void causal_attention_bf16_backward_twin(const uint16_t* q, const uint16_t* k, const uint16_t* v,
                                         const float* out, const uint16_t* dout, const float* lse,
                                         float* dq, float* dk, float* dv, int64_t batch_heads,
                                         int64_t steps, int64_t head_dim, float scale,
                                         const int32_t* segments = nullptr, int64_t heads = 1);

}  // namespace patchbay::kernels::cuda
