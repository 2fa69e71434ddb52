/* Patchbay SDK: the feed-forward interface (PB_KIND_FEEDFORWARD): dense MLPs and
 * mixture-of-experts layers.
 *
 * forward() maps x [B, T, C] to y [B, T, C] and may add auxiliary losses (MoE load balancing,
 * router z-loss: scalar tensors, already weighted by their coefficients, which the host adds
 * to the training loss) and statistics (expert load and the like: plain numbers for metrics).
 * Parameters and init follow patchbay/model_layer.h. Tensors in results are new references
 * the caller releases; statistics arrays are owned by the layer and valid until its next
 * forward() or its destruction.
 */
#ifndef PATCHBAY_FEEDFORWARD_H_
#define PATCHBAY_FEEDFORWARD_H_

#include "patchbay/model_layer.h"

#ifdef __cplusplus
extern "C" {
#endif

#define PB_FEEDFORWARD_INTERFACE_MAJOR 1
#define PB_FEEDFORWARD_INTERFACE_MINOR 0

#define PB_FEEDFORWARD_CAP_CAUSAL (1u << 0) /* each position's output depends only on itself
                                               (or earlier positions): usable in a causal LM.
                                               Expert-choice routing does not have it. */

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

  pb_status* (*init)(void* self, const pb_layer_context* ctx);
  size_t (*parameter_count)(const void* self);
  pb_status* (*parameter)(const void* self, size_t index, const char** out_name /* out */,
                          pb_tensor** out_tensor /* out, borrowed */);
  /* x [B, T, C] borrowed. `training` enables dropout, router noise and training capacity. */
  pb_status* (*forward)(void* self, const pb_tensor* x, int32_t training,
                        pb_feedforward_result* result /* out */);
} pb_feedforward_vtable;

#ifdef __cplusplus
}
#endif

#endif /* PATCHBAY_FEEDFORWARD_H_ */
