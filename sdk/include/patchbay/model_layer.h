/* Patchbay SDK: what model layers (attention, feed-forward) share — the shape context the host
 * gives a layer when it builds the model, and the parameter list a layer exposes.
 *
 * A layer OWNS its parameters: it allocates them in init() through the host ops table
 * (patchbay/ops.h), with requires_grad set, initialised from ctx->seed so that equal seeds give
 * equal models. The host enumerates them (parameter_count / parameter) for the optimizer,
 * gradient clipping and checkpoints; it reads and overwrites their values in place but never
 * replaces or releases them.
 */
#ifndef PATCHBAY_MODEL_LAYER_H_
#define PATCHBAY_MODEL_LAYER_H_

#include "patchbay/component.h"
#include "patchbay/ops.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef enum pb_positional_kind {
  PB_POSITIONAL_NONE = 0,
  PB_POSITIONAL_LEARNED = 1,    /* added to the embeddings by the host; layers do nothing */
  PB_POSITIONAL_SINUSOIDAL = 2, /* added to the embeddings by the host; layers do nothing */
  PB_POSITIONAL_ROTARY = 3,     /* attention rotates q and k (ops->rotary_embedding) */
  PB_POSITIONAL_ALIBI = 4       /* attention adds the ALiBi bias, if it supports it */
} pb_positional_kind;

/* Handed to init(); borrowed for the call. */
typedef struct pb_layer_context {
  size_t struct_size;
  int64_t d_model;       /* C: width of the residual stream */
  int64_t n_heads;       /* attention heads (attention layers); head_dim = d_model / n_heads */
  int64_t d_ff;          /* hidden width of the feed-forward block */
  int64_t max_seq_len;   /* longest sequence the model will see (positions < max_seq_len) */
  int64_t layer_index;   /* 0-based index of the block this layer sits in */
  int64_t n_layers;      /* blocks in the model */
  int32_t causal;        /* 1: the layer is used in a causal LM and must not see the future */
  pb_positional_kind positional;
  double rope_theta;     /* rotary base (10000 by default) */
  double init_std;       /* std of the normal init for weights (0.02 for GPT-2) */
  double residual_init_std; /* std for projections into the residual stream (GPT-2:
                               0.02 / sqrt(2 * n_layers)) */
  uint64_t seed;         /* seed for this layer's parameter init */
  pb_dtype param_dtype;  /* dtype of the parameters (master copy), PB_DTYPE_F32 by default */
  pb_device_type device_type;
  int32_t device_index;

  /* ---- 1.1 (tensor parallelism; attention interface 1.2, feed-forward 1.1) ----
   * Read with PB_HAS_FIELD(ctx, pb_layer_context, tp_host): an older host's context lacks
   * these fields, which means no tensor parallelism. patchbay::tensor_parallel_of(ctx, ops)
   * (tensor_parallel.hpp) does that for C++ layers. */
  int64_t tp_rank; /* this process's place in the tensor-parallel group, [0, tp_size) */
  int64_t tp_size; /* W, the ranks the layer's heads / hidden units are split over; 1 (or 0 in
                      a zero-initialised context) = none. The host passes W > 1 only to a
                      layer whose vtable declares PB_ATTENTION_CAP_TENSOR_PARALLEL /
                      PB_FEEDFORWARD_CAP_TENSOR_PARALLEL, and then every rank runs the same
                      forward on the same full input: the layer joins its partial results with
                      ops->tp_reduce_from_region (ops table version 9). */
  /* Tells the host that parameter `name` (as parameter() will name it) holds this rank's
   * slice of a larger tensor, so that checkpoints hold the full tensor (gathered on save,
   * sliced on load) and gradient clipping counts it once: the full tensor's dim
   * `partition_dim` is cut into `partition_stride` equal blocks, each block into tp_size
   * equal slices, and this rank's parameter is slice tp_rank of every block, concatenated in
   * block order (Megatron's partition_dim / partition_stride: stride 3 for a fused q/k/v
   * weight whose rows are q, k, v). A parameter that is not marked is replicated: every rank
   * holds the same full tensor and sees the same gradient. Call it from init(); `name` is
   * borrowed for the call. Non-NULL when tp_size > 1 (NULL otherwise); `tp_host` is its first
   * argument, owned by the host and valid during init(). */
  pb_status* (*tp_mark_partitioned)(void* tp_host, const char* name, int32_t partition_dim,
                                    int32_t partition_stride);
  void* tp_host;
} pb_layer_context;

#ifdef __cplusplus
}
#endif

#endif /* PATCHBAY_MODEL_LAYER_H_ */
