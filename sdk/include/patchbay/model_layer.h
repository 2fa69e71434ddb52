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
} pb_layer_context;

#ifdef __cplusplus
}
#endif

#endif /* PATCHBAY_MODEL_LAYER_H_ */
