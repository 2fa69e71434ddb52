// Patchbay SDK, header-only C++ layer for Megatron-style tensor parallelism inside a layer
// (pb_layer_context 1.1 and ops table version 9; contract in model_layer.h and ops.h):
//
//   const patchbay::TensorParallel tp = patchbay::tensor_parallel_of(ctx, ops);  // in init()
//   if (tp.size > 1 && n_heads % tp.size != 0) throw ...;                     // refuse clearly
//   weight = add_parameter("fc.weight", tp.shard(full_weight, /*dim=*/0));
//   tp.mark_partitioned("fc.weight", /*dim=*/0);                               // checkpoints
//   ...
//   Tensor h = patchbay::tp_copy_to_region(x).matmul(fc_weight, false, true); // column-parallel
//   Tensor y = patchbay::tp_reduce_from_region(h.matmul(proj_weight, false, true)) + proj_bias;
//
// A layer that uses it declares PB_ATTENTION_CAP_TENSOR_PARALLEL or
// PB_FEEDFORWARD_CAP_TENSOR_PARALLEL; the host passes tp_size > 1 only to such layers. With
// tp.size == 1 (one process, or an older host) nothing here communicates.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "patchbay/model_layer.h"
#include "patchbay/tensor.hpp"

namespace patchbay {

struct TensorParallel {
  int64_t rank = 0;  // [0, size)
  int64_t size = 1;  // ranks the layer is split over (1: not split)
  pb_status* (*mark)(void*, const char*, int32_t, int32_t) = nullptr;
  void* host = nullptr;
  const pb_ops_table* ops = nullptr;  // to read a status the host returns

  // This rank's part of `full` in the layout pb_layer_context::tp_mark_partitioned describes
  // (dim cut into `stride` blocks, slice `rank` of each block, concatenated): a fresh copy,
  // or `full` itself when size == 1. Draw the full tensor with the one-process generator
  // order and keep the shard, so every world size starts from the same model.
  Tensor shard(const Tensor& full, int64_t dim, int64_t stride = 1) const {
    if (size <= 1) return full;
    const int64_t n = full.size(dim);
    if (n % (stride * size) != 0)
      throw PluginError(PB_STATUS_INVALID_ARGUMENT,
                        "tensor parallelism: dim " + std::to_string(dim) + " of size " +
                            std::to_string(n) + " does not split into " + std::to_string(stride) +
                            " blocks of " + std::to_string(size) + " equal slices");
    const int64_t block = n / stride, piece = block / size;
    std::vector<Tensor> pieces;
    for (int64_t b = 0; b < stride; ++b) {
      const int64_t begin = b * block + rank * piece;
      pieces.push_back(full.slice(dim, begin, begin + piece));
    }
    return Ops(full.ops()).concat(pieces, dim);  // concat copies: the full tensor is freed
  }

  // See pb_layer_context::tp_mark_partitioned. No-op when size == 1.
  void mark_partitioned(const char* name, int32_t partition_dim,
                        int32_t partition_stride = 1) const {
    if (size <= 1) return;
    if (mark == nullptr)
      throw PluginError(PB_STATUS_INVALID_ARGUMENT,
                        "layer context: tp_size > 1 but tp_mark_partitioned is NULL");
    check_ops_status(ops, mark(host, name, partition_dim, partition_stride), "tp_mark_partitioned");
  }
};

// The context's tensor-parallel fields; {0, 1} from a host whose context predates them.
inline TensorParallel tensor_parallel_of(const pb_layer_context& ctx, const pb_ops_table* ops) {
  TensorParallel tp;
  tp.ops = ops;
  if (!PB_HAS_FIELD(&ctx, pb_layer_context, tp_host) || ctx.tp_size <= 1) return tp;
  tp.rank = ctx.tp_rank;
  tp.size = ctx.tp_size;
  tp.mark = ctx.tp_mark_partitioned;
  tp.host = ctx.tp_host;
  if (tp.rank < 0 || tp.rank >= tp.size)
    throw PluginError(PB_STATUS_INVALID_ARGUMENT, "layer context: tp_rank " +
                                                      std::to_string(tp.rank) + " outside [0, " +
                                                      std::to_string(tp.size) + ")");
  return tp;
}

inline bool has_tensor_parallel_ops(const pb_ops_table* ops) {
  return PB_HAS_FIELD(ops, pb_ops_table, tp_reduce_from_region) &&
         ops->tp_copy_to_region != nullptr && ops->tp_reduce_from_region != nullptr;
}

namespace detail {
inline void require_tensor_parallel_ops(const pb_ops_table* ops) {
  if (!has_tensor_parallel_ops(ops))
    throw PluginError(PB_STATUS_UNSUPPORTED,
                      "this host's ops table (version " + std::to_string(ops->version) +
                          ") has no tensor-parallel collectives (version 9); upgrade Patchbay");
}
}  // namespace detail

// Megatron's f: identity forward, gradient summed over the group in backward.
inline Tensor tp_copy_to_region(const Tensor& x) {
  const pb_ops_table* ops = x.ops();
  detail::require_tensor_parallel_ops(ops);
  pb_tensor* out = nullptr;
  check_ops_status(ops, ops->tp_copy_to_region(x.handle(), &out), "tp_copy_to_region");
  return Tensor(ops, out);
}

// Megatron's g: sum over the group forward, gradient unchanged in backward.
inline Tensor tp_reduce_from_region(const Tensor& x) {
  const pb_ops_table* ops = x.ops();
  detail::require_tensor_parallel_ops(ops);
  pb_tensor* out = nullptr;
  check_ops_status(ops, ops->tp_reduce_from_region(x.handle(), &out), "tp_reduce_from_region");
  return Tensor(ops, out);
}

}  // namespace patchbay
