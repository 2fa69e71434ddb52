// Freezes the released layouts of the layer, optimizer and parallelism interfaces (each
// 1.0, LP64 Linux): pb_layer_context (model_layer.h), pb_attention_vtable, the
// feed-forward vtable and its result and stat structs, pb_param_options and
// pb_optimizer_vtable, pb_parallelism_vtable, and the enum values plugins compile in. A
// moved field or a changed value breaks every plugin built against an earlier SDK, so the
// build fails here first. Appending a field in a new interface minor changes only that
// struct's FROZEN_SIZE line: update it, keep every offset, and record the bump in
// sdk/CHANGELOG.md. Everything here is checked at compile time (no test case).
#include "abi_freeze.hpp"
#include "patchbay/attention.h"
#include "patchbay/feedforward.h"
#include "patchbay/model_layer.h"
#include "patchbay/optimizer.h"
#include "patchbay/parallelism.h"

static_assert(PB_ATTENTION_INTERFACE_MAJOR == 1, "the layouts below are those of attention 1.x");
static_assert(PB_FEEDFORWARD_INTERFACE_MAJOR == 1,
              "the layouts below are those of feed-forward 1.x");
static_assert(PB_OPTIMIZER_INTERFACE_MAJOR == 1, "the layouts below are those of optimizer 1.x");
static_assert(PB_PARALLELISM_INTERFACE_MAJOR == 1,
              "the layouts below are those of parallelism 1.x");

// ---- model_layer.h: what init() receives (attention and feed-forward) ----
FROZEN_SIZE(pb_layer_context, 144);  // 1.1: tp_rank, tp_size, tp_mark_partitioned, tp_host
FROZEN_OFFSET(pb_layer_context, tp_rank, 112);
FROZEN_OFFSET(pb_layer_context, tp_size, 120);
FROZEN_OFFSET(pb_layer_context, tp_mark_partitioned, 128);
FROZEN_OFFSET(pb_layer_context, tp_host, 136);
FROZEN_OFFSET(pb_layer_context, struct_size, 0);
FROZEN_OFFSET(pb_layer_context, d_model, 8);
FROZEN_OFFSET(pb_layer_context, n_heads, 16);
FROZEN_OFFSET(pb_layer_context, d_ff, 24);
FROZEN_OFFSET(pb_layer_context, max_seq_len, 32);
FROZEN_OFFSET(pb_layer_context, layer_index, 40);
FROZEN_OFFSET(pb_layer_context, n_layers, 48);
FROZEN_OFFSET(pb_layer_context, causal, 56);
FROZEN_OFFSET(pb_layer_context, positional, 60);
FROZEN_OFFSET(pb_layer_context, rope_theta, 64);
FROZEN_OFFSET(pb_layer_context, init_std, 72);
FROZEN_OFFSET(pb_layer_context, residual_init_std, 80);
FROZEN_OFFSET(pb_layer_context, seed, 88);
FROZEN_OFFSET(pb_layer_context, param_dtype, 96);
FROZEN_OFFSET(pb_layer_context, device_type, 100);
FROZEN_OFFSET(pb_layer_context, device_index, 104);
static_assert(PB_POSITIONAL_NONE == 0 && PB_POSITIONAL_LEARNED == 1 &&
              PB_POSITIONAL_SINUSOIDAL == 2 && PB_POSITIONAL_ROTARY == 3 &&
              PB_POSITIONAL_ALIBI == 4);

// ---- attention.h ----
FROZEN_SIZE(pb_attention_vtable,
            144);  // 1.3: cross-attention functions; 1.4: state_fork; 1.5: forward_packed
FROZEN_OFFSET(pb_attention_vtable, forward_packed, 136);  // interface 1.5
FROZEN_OFFSET(pb_attention_vtable, state_reorder, 96);
FROZEN_OFFSET(pb_attention_vtable, cross_memory_create, 104);  // interface 1.3
FROZEN_OFFSET(pb_attention_vtable, cross_memory_destroy, 112);
FROZEN_OFFSET(pb_attention_vtable, forward_cross, 120);
FROZEN_OFFSET(pb_attention_vtable, state_fork, 128);  // interface 1.4
FROZEN_OFFSET(pb_attention_vtable, struct_size, 0);
FROZEN_OFFSET(pb_attention_vtable, capabilities, 8);
FROZEN_OFFSET(pb_attention_vtable, cache_kind, 16);
FROZEN_OFFSET(pb_attention_vtable, complexity, 24);
FROZEN_OFFSET(pb_attention_vtable, init, 32);
FROZEN_OFFSET(pb_attention_vtable, parameter_count, 40);
FROZEN_OFFSET(pb_attention_vtable, parameter, 48);
FROZEN_OFFSET(pb_attention_vtable, forward, 56);
FROZEN_OFFSET(pb_attention_vtable, state_create, 64);
FROZEN_OFFSET(pb_attention_vtable, state_destroy, 72);
FROZEN_OFFSET(pb_attention_vtable, forward_step, 80);
FROZEN_OFFSET(pb_attention_vtable, state_length, 88);
static_assert(PB_ATTENTION_CAP_CAUSAL == 1u && PB_ATTENTION_CAP_NONCAUSAL == 2u &&
              PB_ATTENTION_CAP_ROTARY == 4u && PB_ATTENTION_CAP_ALIBI == 8u &&
              PB_ATTENTION_CAP_TENSOR_PARALLEL == 16u && PB_ATTENTION_CAP_CROSS == 32u &&
              PB_ATTENTION_CAP_PACKED == 64u &&
              PB_ATTENTION_CAP_CROSS_POSITIONAL == 128u);  // 1.6: a bit, no new field
static_assert(PB_ATTENTION_CACHE_NONE == 0 && PB_ATTENTION_CACHE_KV == 1 &&
              PB_ATTENTION_CACHE_RECURRENT == 2);

// ---- feedforward.h ----
FROZEN_SIZE(pb_feedforward_stat, 32);
FROZEN_OFFSET(pb_feedforward_stat, struct_size, 0);
FROZEN_OFFSET(pb_feedforward_stat, name, 8);
FROZEN_OFFSET(pb_feedforward_stat, values, 16);
FROZEN_OFFSET(pb_feedforward_stat, count, 24);

FROZEN_SIZE(pb_feedforward_result, 40);
FROZEN_OFFSET(pb_feedforward_result, struct_size, 0);
FROZEN_OFFSET(pb_feedforward_result, y, 8);
FROZEN_OFFSET(pb_feedforward_result, aux_loss, 16);
FROZEN_OFFSET(pb_feedforward_result, stats, 24);
FROZEN_OFFSET(pb_feedforward_result, stat_count, 32);

FROZEN_SIZE(pb_feedforward_vtable, 48);
FROZEN_OFFSET(pb_feedforward_vtable, struct_size, 0);
FROZEN_OFFSET(pb_feedforward_vtable, capabilities, 8);
FROZEN_OFFSET(pb_feedforward_vtable, init, 16);
FROZEN_OFFSET(pb_feedforward_vtable, parameter_count, 24);
FROZEN_OFFSET(pb_feedforward_vtable, parameter, 32);
FROZEN_OFFSET(pb_feedforward_vtable, forward, 40);
static_assert(PB_FEEDFORWARD_CAP_CAUSAL == 1u && PB_FEEDFORWARD_CAP_TENSOR_PARALLEL == 2u);

// ---- optimizer.h ----
FROZEN_SIZE(pb_param_options, 32);
FROZEN_OFFSET(pb_param_options, struct_size, 0);
FROZEN_OFFSET(pb_param_options, weight_decay_scale, 8);
FROZEN_OFFSET(pb_param_options, lr_scale, 16);
FROZEN_OFFSET(pb_param_options, group, 24);

FROZEN_SIZE(pb_optimizer_vtable, 64);  // 1.1 appended step_scaled, 1.2 set_bf16_copy
FROZEN_OFFSET(pb_optimizer_vtable, struct_size, 0);
FROZEN_OFFSET(pb_optimizer_vtable, set_shard, 8);
FROZEN_OFFSET(pb_optimizer_vtable, add_parameter, 16);
FROZEN_OFFSET(pb_optimizer_vtable, step, 24);
FROZEN_OFFSET(pb_optimizer_vtable, state_count, 32);
FROZEN_OFFSET(pb_optimizer_vtable, state_tensor, 40);
FROZEN_OFFSET(pb_optimizer_vtable, step_scaled, 48);
FROZEN_OFFSET(pb_optimizer_vtable, set_bf16_copy, 56);

// ---- parallelism.h ----
FROZEN_SIZE(pb_parallelism_vtable, 96);  // 1.1 appended all_reduce_start, wait, abort_job
FROZEN_OFFSET(pb_parallelism_vtable, struct_size, 0);
FROZEN_OFFSET(pb_parallelism_vtable, strategy, 8);
FROZEN_OFFSET(pb_parallelism_vtable, rank, 16);
FROZEN_OFFSET(pb_parallelism_vtable, world_size, 24);
FROZEN_OFFSET(pb_parallelism_vtable, all_reduce, 32);
FROZEN_OFFSET(pb_parallelism_vtable, broadcast, 40);
FROZEN_OFFSET(pb_parallelism_vtable, all_gather, 48);
FROZEN_OFFSET(pb_parallelism_vtable, reduce_scatter, 56);
FROZEN_OFFSET(pb_parallelism_vtable, barrier, 64);
FROZEN_OFFSET(pb_parallelism_vtable, all_reduce_start, 72);
FROZEN_OFFSET(pb_parallelism_vtable, wait, 80);
FROZEN_OFFSET(pb_parallelism_vtable, abort_job, 88);
static_assert(PB_PARALLEL_SINGLE == 0 && PB_PARALLEL_DATA == 1 && PB_PARALLEL_ZERO1 == 2 &&
              PB_PARALLEL_TENSOR == 3);
static_assert(PB_COLLECTIVE_SUM == 0 && PB_COLLECTIVE_AVG == 1 && PB_COLLECTIVE_MAX == 2);
