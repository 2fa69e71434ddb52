/* Patchbay SDK: the feed-forward interface (PB_KIND_FEEDFORWARD): dense MLPs and
 * mixture-of-experts layers.
 *
 * forward() maps x [B, T, C] to y [B, T, C] and may add auxiliary losses (MoE load balancing,
 * router z-loss: scalar tensors, already weighted by their coefficients, which the host adds
 * to the training loss) and statistics (expert load and the like: plain numbers for metrics).
 * Parameters and init follow patchbay/model_layer.h. Tensors in results are new references
 * the caller releases; statistics arrays are owned by the layer and valid until its next
 * forward() or its destruction.
 *
 * Thread safety: one object is used by one thread at a time.
 */
#ifndef PATCHBAY_FEEDFORWARD_H_
#define PATCHBAY_FEEDFORWARD_H_

#include "patchbay/model_layer.h"

#ifdef __cplusplus
extern "C" {
#endif

#define PB_FEEDFORWARD_INTERFACE_MAJOR 1
#define PB_FEEDFORWARD_INTERFACE_MINOR 1 /* 1.1: tensor parallelism */

#define PB_FEEDFORWARD_CAP_CAUSAL (1u << 0) /* each position's output depends only on itself
                                               (or earlier positions): usable in a causal LM.
                                               Expert-choice routing does not have it. */
/* 1.1: splits its hidden units over pb_layer_context::tp_size ranks (Megatron-style tensor
 * parallelism). The host refuses `[parallelism] kind = "mpi_tensor"` for a layer without it. */
#define PB_FEEDFORWARD_CAP_TENSOR_PARALLEL (1u << 1)

/* One named statistic: `count` floats, e.g. name "expert_load", values = fraction of tokens
 * routed to each expert. */
typedef struct pb_feedforward_stat {
  size_t struct_size;
  const char* name;
  const float* values;
  size_t count;
} pb_feedforward_stat;

/* Filled by forward(). The caller zero-initialises it and sets struct_size. */
typedef struct pb_feedforward_result {
  size_t struct_size;
  pb_tensor* y;                 /* out, new reference: [B, T, C] */
  pb_tensor* aux_loss;          /* out, new reference or NULL: scalar, weighted, differentiable */
  const pb_feedforward_stat* stats; /* out, owned by the layer, or NULL */
  size_t stat_count;
} pb_feedforward_result;

typedef struct pb_feedforward_vtable {
  size_t struct_size;
  uint64_t capabilities; /* PB_FEEDFORWARD_CAP_* */

  /* Allocates and initialises the parameters for `ctx` (borrowed). Called once, right after
   * create(). A context the layer cannot serve is PB_STATUS_INVALID_ARGUMENT with a message. */
  pb_status* (*init)(void* self, const pb_layer_context* ctx);
  /* Parameters, index in [0, parameter_count). *out_name is owned by the layer ("fc.weight",
   * unique, [A-Za-z0-9_.]+) and *out_tensor is BORROWED; both live as long as the layer. */
  size_t (*parameter_count)(const void* self);
  pb_status* (*parameter)(const void* self, size_t index, const char** out_name /* out */,
                          pb_tensor** out_tensor /* out, borrowed */);
  /* x [B, T, C] borrowed; y has x's shape and dtype. `training` enables dropout, router noise
   * and training capacity. Records autograd when gradients are enabled. The layer writes only
   * the result fields that lie inside result->struct_size. x whose last dim is not d_model is
   * PB_STATUS_INVALID_ARGUMENT. */
  pb_status* (*forward)(void* self, const pb_tensor* x, int32_t training,
                        pb_feedforward_result* result /* out */);
} pb_feedforward_vtable;

#ifdef __cplusplus
}
#endif

#endif /* PATCHBAY_FEEDFORWARD_H_ */
