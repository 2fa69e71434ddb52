// causal_linear_attention (ops table version 5): the numerator of causal linear attention,
//   out[..., l, :] = sum_{j <= l} (q[..., l, :] . k[..., j, :]) v[..., j, :]
// for q, k [..., T, E] and v [..., T, M] (same leading dims, same float dtype) -> out
// [..., T, M] in that dtype. Computed in fp32 whatever the dtype by the fused prefix-sum
// kernel of patchbay_kernels_cpu (kernels/cpu/causal_linear_attention.hpp): time O(T E M),
// memory O(T (E + M)); the backward re-sweeps instead of storing per-step states. The
// feature map and normaliser belong to the caller (attention_linear, attention_performer).
// Under a bf16 autocast policy on the CPU: bf16 operands (q, k, v, dout, the chunk products and
// the states a product reads) with f32 accumulation, f32 results.
#pragma once

#include "engine/tensor.hpp"

namespace patchbay::engine {

Tensor causal_linear_attention(const Tensor& q, const Tensor& k, const Tensor& v);

}  // namespace patchbay::engine
