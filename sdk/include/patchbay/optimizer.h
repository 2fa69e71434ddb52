/* Patchbay SDK: the optimizer interface (PB_KIND_OPTIMIZER).
 *
 * The host registers every trainable parameter once (add_parameter, in a fixed order, with its
 * group options), then per optimisation step computes gradients, clips them, sets the learning
 * rate from its schedule and calls step(). The optimizer updates the parameters in place
 * from their .grad (ops table), keeping its own state (moments, step counts). It never writes
 * the gradients.
 *
 * Hyperparameters. The learning rate belongs to the host (its schedule; step() receives it).
 * Every other hyperparameter, weight decay included, is a key of the component's own config
 * table (so `weight_decay` has each optimizer's customary default: AdamW 0.01, SGD 0). The
 * host's parameter groups only say, per parameter, how much of the configured weight decay
 * and of the learning rate applies (pb_param_options: scales, 0 = no decay for biases and
 * norm gains by default).
 *
 * Clipping folded into the update (minor 1). A host that clips by the global gradient norm
 * hands the clip factor to step_scaled() when the optimizer provides it, and the optimizer
 * multiplies each gradient element by it inside its own update loop: one pass over the
 * parameters instead of a scaling pass over every gradient first. Optimizers without
 * step_scaled (1.0 plugins, or NULL) keep working: the host scales the gradients in place and
 * calls step().
 *
 * bf16 weight copies written by the update pass (minor 2). Under bf16 mixed precision the host
 * multiplies bf16 copies of the f32 master weights; rounding them is a pass of its own over
 * every weight (read 4 bytes, write 2) after each update. A host may instead hand the optimizer
 * one bf16 tensor per parameter (set_bf16_copy); the optimizer then writes each updated element,
 * rounded, in the same pass that updates it (apex's FusedAdam does the same for fp16 model
 * copies). Optimizers without it (1.0, 1.1 plugins, or NULL) keep working: the host rounds.
 *
 * State that checkpoints: every piece of state is a tensor the optimizer exposes by a stable
 * name ("exp_avg/blocks.0.attn.qkv.weight", "step/wte.weight"); all of it exists once the
 * parameters are registered (before the first step), so the host saves them and, on resume,
 * overwrites them in place after registering the same parameters; steps then continue as if
 * never interrupted. Sharding (ZeRO-1): set_shard(rank, world) before add_parameter makes the
 * optimizer keep state only for the parameters it owns (index % world == rank) and update
 * only those; the parallelism layer then broadcasts each updated parameter from its owner.
 *
 * Tensors are borrowed unless stated; parameters outlive the optimizer. One object is used by
 * one thread at a time (it may use threads inside step()).
 */
#ifndef PATCHBAY_OPTIMIZER_H_
#define PATCHBAY_OPTIMIZER_H_

#include "patchbay/model_layer.h"

#ifdef __cplusplus
extern "C" {
#endif

#define PB_OPTIMIZER_INTERFACE_MAJOR 1
#define PB_OPTIMIZER_INTERFACE_MINOR 2

/* Per-parameter options, from the host's parameter groups (core/train/param_groups: by
 * default parameters with fewer than 2 dims, names ending in ".bias" and names containing
 * "norm" get weight_decay_scale 0; 2-D weights, embeddings included, get 1). */
typedef struct pb_param_options {
  size_t struct_size;
  /* Multiplies the component's configured weight decay for this parameter (decoupled for
   * AdamW, L2 for SGD): 1 = decay as configured, 0 = no decay. >= 0. */
  double weight_decay_scale;
  double lr_scale;   /* multiplies the step's learning rate (>= 0; 1 by default) */
  const char* group; /* group name, for logs ("decay", "no_decay"); nullable */
} pb_param_options;

typedef struct pb_optimizer_vtable {
  size_t struct_size;

  /* Optional (NULL: no sharding support). Called at most once, before the first add_parameter
   * (later calls are refused); 0 <= rank < world_size. */
  pb_status* (*set_shard)(void* self, int64_t rank, int64_t world_size);

  /* Registers parameter number `index` (0, 1, 2, ... in order; any other index is refused
   * with PB_STATUS_INVALID_ARGUMENT). `name` (unique, non-empty) and `options` are borrowed
   * (copy them); `options` is nullable (then scales 1, group "default") and read only within
   * its struct_size. `param` stays alive and in place until the optimizer is destroyed. An
   * optimizer that cannot update this parameter (dtype, device) refuses here, naming it, with
   * PB_STATUS_UNSUPPORTED. The owner creates the parameter's state here (zeros). */
  pb_status* (*add_parameter)(void* self, size_t index, const char* name, pb_tensor* param,
                              const pb_param_options* options);

  /* One update of every owned parameter with learning rate `lr` (already scheduled, >= 0;
   * each parameter uses lr * lr_scale). Parameters whose grad is undefined are skipped: their
   * values and their state (step counts included) stay as they were. */
  pb_status* (*step)(void* self, double lr);

  /* State tensors of the owned parameters, index in [0, state_count); the count and names
   * never change after the last add_parameter. *out_name is owned by the optimizer (valid
   * while it lives); the tensor is BORROWED and may be overwritten in place by the host
   * (resume). */
  size_t (*state_count)(const void* self);
  pb_status* (*state_tensor)(const void* self, size_t index, const char** out_name /* out */,
                             pb_tensor** out_tensor /* out, borrowed */);

  /* ---- minor 1 (clipping folded into the update pass) ----
   * Read only when PB_HAS_FIELD(vtable, pb_optimizer_vtable, step_scaled) and non-NULL; NULL
   * means "not supported" (the host then scales the gradients itself and calls step()).
   * As step(self, lr), with every gradient read as if it had first been multiplied by
   * `grad_scale` (finite, > 0) in place: for an f32 gradient element g the optimizer uses
   * g * (float)grad_scale, one f32 multiply, so the result is that of the host scaling the
   * gradients in f32 and calling step(). The gradients themselves are not written (they stay
   * unscaled). step_scaled(self, lr, 1.0) equals step(self, lr). */
  pb_status* (*step_scaled)(void* self, double lr, double grad_scale);

  /* ---- minor 2 (bf16 weight copies written by the update pass) ----
   * Read only when PB_HAS_FIELD(vtable, pb_optimizer_vtable, set_bf16_copy) and non-NULL; NULL
   * means "not supported" (the host rounds the weights itself).
   * Registers `copy` for registered parameter `index`: a contiguous bf16 tensor with the
   * parameter's shape, on its device, which the optimizer retains (until replaced, removed or
   * the optimizer is destroyed); NULL removes the registration. From then on every step() and
   * step_scaled() that updates the parameter also stores into the copy each updated element
   * rounded to the nearest bf16, ties to even, NaN kept a NaN (the ops table's
   * to_dtype(param, PB_DTYPE_BF16) of the new value), in the same pass. A step that does not
   * update the parameter (grad undefined, not owned under set_shard) leaves the copy as it is;
   * the copy is never read. The copy's contents before the first such step are the host's
   * business (it rounds the parameter itself once). An index not registered, or a copy of
   * another dtype, shape or layout, is refused with PB_STATUS_INVALID_ARGUMENT; a parameter
   * whose copy this optimizer cannot write, with PB_STATUS_UNSUPPORTED (the host then rounds that
   * one itself). */
  pb_status* (*set_bf16_copy)(void* self, size_t index, pb_tensor* copy);
} pb_optimizer_vtable;

#ifdef __cplusplus
}
#endif

#endif /* PATCHBAY_OPTIMIZER_H_ */
