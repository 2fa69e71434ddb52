// sorted_chunk_attention (ops table version 14): the attention core of Reformer LSH attention
// as one fused op. q, k, v [..., T, D] (one shape, one float dtype) in position order; a slot
// plan slot_position, slot_group int32 [..., S] (same leading dims, S a multiple of chunk_len)
// saying which position each sorted slot reads (-1 padding) and its group (round * n_buckets +
// bucket for LSH). Chunks of chunk_len slots attend to their own and, when it holds the same
// group, the previous chunk; a pair is kept when the groups match and (causal) the key's
// position is <= the query's; the self pair gets self_bias, others -log(count) with dedup;
// every position's occurrences combine by their log-sum-exp. Exact semantics:
// kernels/cpu/include/patchbay/kernels/sorted_chunk_attention.hpp. Computed in fp32 whatever
// the dtype (out in q's dtype), differentiable in q, k and v; the plan is not. Memory O(T D +
// T rounds), never S x S; the backward recomputes the chunk scores. Under a bf16 autocast policy
// on the CPU: bf16 operands (q, k, v, dout, P, dS) with f32 accumulation, f32 results.
#pragma once

#include <cstdint>

#include "engine/tensor.hpp"

namespace patchbay::engine {

struct SortedChunkOptions {
  int64_t chunk_len = 0;
  double scale = 1.0;
  double self_bias = 0.0;
  bool causal = true;
  bool dedup = false;
};

Tensor sorted_chunk_attention(const Tensor& q, const Tensor& k, const Tensor& v,
                              const Tensor& slot_position, const Tensor& slot_group,
                              const SortedChunkOptions& options);

}  // namespace patchbay::engine
