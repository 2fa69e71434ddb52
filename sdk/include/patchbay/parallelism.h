/* Patchbay SDK: the parallelism interface (PB_KIND_PARALLELISM).
 *
 * A process group: rank and world size, and collectives on tensors built on a real engine
 * (MPI on CPU, NCCL on GPU; a single-process plugin where world_size is 1). Collectives are
 * blocking and must be called by every rank in the same order. The strategy (single, data
 * parallel, ZeRO-1, tensor parallel) is the plugin's `strategy` field; the host reads it to
 * decide where to reduce gradients and how to shard the optimizer.
 *
 * Tensors are borrowed handles; collectives write into the tensors they are given (never
 * replace them). Invalid arguments (NULL tensor, unknown op, root outside [0, world), shapes or
 * dtypes that do not match) are PB_STATUS_INVALID_ARGUMENT with a message. rank() and
 * world_size() never fail. Thread safety: one object is used by one thread at a time.
 */
#ifndef PATCHBAY_PARALLELISM_H_
#define PATCHBAY_PARALLELISM_H_

#include "patchbay/model_layer.h"

#ifdef __cplusplus
extern "C" {
#endif

#define PB_PARALLELISM_INTERFACE_MAJOR 1
#define PB_PARALLELISM_INTERFACE_MINOR 1 /* 1.1: all_reduce_start / wait, abort_job */

typedef enum pb_parallel_strategy {
  PB_PARALLEL_SINGLE = 0,         /* one process */
  PB_PARALLEL_DATA = 1,           /* replicas; gradients all-reduced (averaged) */
  PB_PARALLEL_ZERO1 = 2,          /* data parallel + optimizer state sharded by rank */
  PB_PARALLEL_TENSOR = 3          /* Megatron-style split of heads and FFN columns */
} pb_parallel_strategy;

typedef enum pb_collective_op {
  PB_COLLECTIVE_SUM = 0,
  PB_COLLECTIVE_AVG = 1,
  PB_COLLECTIVE_MAX = 2
} pb_collective_op;

/* A collective in flight (1.1), owned by the plugin until wait() frees it. */
typedef struct pb_collective_request pb_collective_request;

typedef struct pb_parallelism_vtable {
  size_t struct_size;
  pb_parallel_strategy strategy;

  int64_t (*rank)(const void* self);
  int64_t (*world_size)(const void* self);
  /* In place on `tensor` (every rank passes the same shape and dtype). */
  pb_status* (*all_reduce)(void* self, pb_tensor* tensor, pb_collective_op op);
  pb_status* (*broadcast)(void* self, pb_tensor* tensor, int64_t root);
  /* out [world * N...] = concatenation over ranks of in [N...] along dim 0. */
  pb_status* (*all_gather)(void* self, const pb_tensor* in, pb_tensor* out);
  /* out [N/world...] = this rank's slice of the reduction of in [N...] along dim 0. */
  pb_status* (*reduce_scatter)(void* self, const pb_tensor* in, pb_tensor* out, pb_collective_op op);
  pb_status* (*barrier)(void* self);

  /* ---- 1.1 (MPI parallelism) ---- a host reads these only when struct_size covers them. */
  /* Starts an all-reduce of `tensor` in place and returns at once (non-blocking): the host
     must neither read nor write the tensor until wait() returns; every rank starts the same
     all-reduces in the same order. *out_request is set on success (never NULL). */
  pb_status* (*all_reduce_start)(void* self, pb_tensor* tensor, pb_collective_op op,
                                 pb_collective_request** out_request);
  /* Completes the request (the tensor then holds the result) and frees it, also on error. */
  pb_status* (*wait)(void* self, pb_collective_request* request);
  /* Ends every process of the job now, with `exit_code`, after printing `message` naming
     this rank (MPI_Abort); used when one rank fails so that no rank waits forever in a
     collective. Returns only if the plugin cannot abort (then the host exits by itself). */
  void (*abort_job)(void* self, int32_t exit_code, const char* message);
} pb_parallelism_vtable;

#ifdef __cplusplus
}
#endif

#endif /* PATCHBAY_PARALLELISM_H_ */
