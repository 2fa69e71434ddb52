/* Patchbay SDK: the optimizer interface (PB_KIND_OPTIMIZER).
 *
 * The host registers every trainable parameter once (add_parameter, in a fixed order, with its
 * group options), then per optimisation step computes gradients, clips them, sets the learning
 * rate from its schedule and calls step(). The optimizer updates the parameters in place
 * from their .grad (ops table), keeping its own state (moments, step counts).
 *
 * State that checkpoints: every piece of state is a tensor the optimizer exposes by a stable
 * name ("exp_avg/blocks.0.attn.qkv.weight", "step"); the host saves them and, on resume,
 * overwrites them in place after registering the same parameters. Sharding (ZeRO-1):
 * set_shard(rank, world) before add_parameter makes the optimizer keep state only for the
 * parameters it owns (index % world == rank); the parallelism layer then broadcasts each
 * updated parameter from its owner.
 *
 * Tensors are borrowed unless stated; parameters outlive the optimizer.
 */
#ifndef PATCHBAY_OPTIMIZER_H_
#define PATCHBAY_OPTIMIZER_H_

#include "patchbay/model_layer.h"

#ifdef __cplusplus
extern "C" {
#endif

#define PB_OPTIMIZER_INTERFACE_MAJOR 1
#define PB_OPTIMIZER_INTERFACE_MINOR 0

/* Per-parameter options, from the host's parameter groups (by default biases, norm gains and
 * embeddings of size 1 dims get weight_decay 0; see docs). */
typedef struct pb_param_options {
  size_t struct_size;
  double weight_decay; /* decoupled (AdamW) or L2 (SGD) coefficient for this parameter */
  double lr_scale;     /* multiplies the step's learning rate */
  const char* group;   /* group name, for logs ("decay", "no_decay") */
} pb_param_options;

typedef struct pb_optimizer_vtable {
  size_t struct_size;

  /* Optional (NULL: no sharding support). Called before the first add_parameter. */
  pb_status* (*set_shard)(void* self, int64_t rank, int64_t world_size);

  /* Registers parameter number `index` (0, 1, 2, ... in order). `name` and `options` are
   * borrowed (copy them); `param` stays alive and in place until the optimizer is destroyed. */
  pb_status* (*add_parameter)(void* self, size_t index, const char* name, pb_tensor* param,
                              const pb_param_options* options);

  /* One update of every owned parameter with learning rate `lr` (already scheduled).
   * Parameters whose grad is undefined are skipped. */
  pb_status* (*step)(void* self, double lr);

  /* State tensors, index in [0, state_count). *out_name is owned by the optimizer; the tensor
   * is BORROWED and may be overwritten in place by the host (resume). */
  size_t (*state_count)(const void* self);
  pb_status* (*state_tensor)(const void* self, size_t index, const char** out_name /* out */,
                             pb_tensor** out_tensor /* out, borrowed */);
} pb_optimizer_vtable;

#ifdef __cplusplus
}
#endif

#endif /* PATCHBAY_OPTIMIZER_H_ */
