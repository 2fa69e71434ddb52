// Freezes the tensor ops table (ops.h) as released at version 2, LP64 Linux: the offset of
// every function up to rotary_embedding, pb_custom_op_desc, and the enum values plugins
// compile in. Later versions APPEND functions (struct_size and PB_HAS_FIELD tell a plugin
// what it may call): a new version block changes only the total-size line marked below;
// every offset here stays as it is.
#include <doctest/doctest.h>

#include "abi_freeze.hpp"
#include "patchbay/ops.h"

static_assert(PB_OPS_TABLE_VERSION >= 2,
              "the layout below is version 2's, which later ones extend");

// ---- pb_custom_op_desc ----
FROZEN_SIZE(pb_custom_op_desc, 56);
FROZEN_OFFSET(pb_custom_op_desc, struct_size, 0);
FROZEN_OFFSET(pb_custom_op_desc, name, 8);
FROZEN_OFFSET(pb_custom_op_desc, num_outputs, 16);
FROZEN_OFFSET(pb_custom_op_desc, user_data, 24);
FROZEN_OFFSET(pb_custom_op_desc, forward, 32);
FROZEN_OFFSET(pb_custom_op_desc, backward, 40);
FROZEN_OFFSET(pb_custom_op_desc, destroy, 48);

// ---- pb_ops_table, versions 1 and 2 ----
FROZEN_OFFSET(pb_ops_table, struct_size, 0);
FROZEN_OFFSET(pb_ops_table, version, 8);
FROZEN_OFFSET(pb_ops_table, status_create, 16);
FROZEN_OFFSET(pb_ops_table, status_code, 24);
FROZEN_OFFSET(pb_ops_table, status_message, 32);
FROZEN_OFFSET(pb_ops_table, status_free, 40);
FROZEN_OFFSET(pb_ops_table, retain, 48);
FROZEN_OFFSET(pb_ops_table, release, 56);
FROZEN_OFFSET(pb_ops_table, ndim, 64);
FROZEN_OFFSET(pb_ops_table, shape, 72);
FROZEN_OFFSET(pb_ops_table, strides, 80);
FROZEN_OFFSET(pb_ops_table, numel, 88);
FROZEN_OFFSET(pb_ops_table, dtype, 96);
FROZEN_OFFSET(pb_ops_table, device_type, 104);
FROZEN_OFFSET(pb_ops_table, device_index, 112);
FROZEN_OFFSET(pb_ops_table, is_contiguous, 120);
FROZEN_OFFSET(pb_ops_table, data_ptr, 128);
FROZEN_OFFSET(pb_ops_table, copy_to_host, 136);
FROZEN_OFFSET(pb_ops_table, copy_from_host, 144);
FROZEN_OFFSET(pb_ops_table, empty, 152);
FROZEN_OFFSET(pb_ops_table, full, 160);
FROZEN_OFFSET(pb_ops_table, from_data, 168);
FROZEN_OFFSET(pb_ops_table, arange, 176);
FROZEN_OFFSET(pb_ops_table, generator_create, 184);
FROZEN_OFFSET(pb_ops_table, generator_free, 192);
FROZEN_OFFSET(pb_ops_table, randn, 200);
FROZEN_OFFSET(pb_ops_table, uniform, 208);
FROZEN_OFFSET(pb_ops_table, set_requires_grad, 216);
FROZEN_OFFSET(pb_ops_table, requires_grad, 224);
FROZEN_OFFSET(pb_ops_table, grad, 232);
FROZEN_OFFSET(pb_ops_table, zero_grad, 240);
FROZEN_OFFSET(pb_ops_table, backward, 248);
FROZEN_OFFSET(pb_ops_table, detach, 256);
FROZEN_OFFSET(pb_ops_table, set_grad_enabled, 264);
FROZEN_OFFSET(pb_ops_table, unary, 272);
FROZEN_OFFSET(pb_ops_table, binary, 280);
FROZEN_OFFSET(pb_ops_table, scalar, 288);
FROZEN_OFFSET(pb_ops_table, matmul, 296);
FROZEN_OFFSET(pb_ops_table, layer_norm, 304);
FROZEN_OFFSET(pb_ops_table, rms_norm, 312);
FROZEN_OFFSET(pb_ops_table, reduce, 320);
FROZEN_OFFSET(pb_ops_table, reshape, 328);
FROZEN_OFFSET(pb_ops_table, view, 336);
FROZEN_OFFSET(pb_ops_table, permute, 344);
FROZEN_OFFSET(pb_ops_table, transpose, 352);
FROZEN_OFFSET(pb_ops_table, slice, 360);
FROZEN_OFFSET(pb_ops_table, expand, 368);
FROZEN_OFFSET(pb_ops_table, contiguous, 376);
FROZEN_OFFSET(pb_ops_table, concat, 384);
FROZEN_OFFSET(pb_ops_table, stack, 392);
FROZEN_OFFSET(pb_ops_table, to_dtype, 400);
FROZEN_OFFSET(pb_ops_table, masked_fill, 408);
FROZEN_OFFSET(pb_ops_table, dropout, 416);
FROZEN_OFFSET(pb_ops_table, attention, 424);
FROZEN_OFFSET(pb_ops_table, embedding, 432);
FROZEN_OFFSET(pb_ops_table, cross_entropy, 440);
FROZEN_OFFSET(pb_ops_table, cumsum, 448);
FROZEN_OFFSET(pb_ops_table, gather, 456);
FROZEN_OFFSET(pb_ops_table, scatter_add, 464);
FROZEN_OFFSET(pb_ops_table, sort, 472);
FROZEN_OFFSET(pb_ops_table, argsort, 480);
FROZEN_OFFSET(pb_ops_table, topk, 488);
FROZEN_OFFSET(pb_ops_table, custom_op_create, 496);
FROZEN_OFFSET(pb_ops_table, custom_op_release, 504);
FROZEN_OFFSET(pb_ops_table, custom_op_apply, 512);
FROZEN_OFFSET(pb_ops_table, ctx_save_for_backward, 520);
FROZEN_OFFSET(pb_ops_table, ctx_num_saved, 528);
FROZEN_OFFSET(pb_ops_table, ctx_saved, 536);
FROZEN_OFFSET(pb_ops_table, ctx_needs_input_grad, 544);
FROZEN_OFFSET(pb_ops_table, memory_stats, 552);
FROZEN_OFFSET(pb_ops_table, rotary_embedding, 560);
// A version-2 table is exactly this long: a host of version 2 sets struct_size to it.
inline constexpr size_t kOpsTableVersion2Size = 568;
static_assert(offsetof(pb_ops_table, rotary_embedding) + sizeof(void*) == kOpsTableVersion2Size);

// The whole table as this SDK declares it. The ONLY line an appended version changes.
FROZEN_SIZE(pb_ops_table,
            672);  // version 3: attention_with_options; version 5: causal_linear_attention;
                   // version 6: set_autocast_dtype, autocast_dtype, autocast_clear_cache;
                   // version 7: bias_activation; version 9: tp_copy_to_region,
                   // tp_reduce_from_region; version 10: linear; version 11: to_device,
                   // from_data_on_device; version 12: optimizer_update;
                   // version 14: sorted_chunk_attention
FROZEN_OFFSET(pb_ops_table, attention_with_options, 568);
FROZEN_OFFSET(pb_ops_table, tp_reduce_from_region, 624);
FROZEN_OFFSET(pb_ops_table, linear, 632);
FROZEN_OFFSET(pb_ops_table, to_device, 640);
FROZEN_OFFSET(pb_ops_table, from_data_on_device, 648);
FROZEN_OFFSET(pb_ops_table, optimizer_update, 656);
FROZEN_OFFSET(pb_ops_table, sorted_chunk_attention, 664);
// pb_sorted_chunk_options (version 14): appended fields only.
FROZEN_OFFSET(pb_sorted_chunk_options, chunk_len, 8);
FROZEN_OFFSET(pb_sorted_chunk_options, scale, 16);
FROZEN_OFFSET(pb_sorted_chunk_options, self_bias, 24);
FROZEN_OFFSET(pb_sorted_chunk_options, causal, 32);
FROZEN_OFFSET(pb_sorted_chunk_options, dedup, 36);
FROZEN_SIZE(pb_sorted_chunk_options, 40);
// pb_optimizer_update (version 12): appended fields only.
FROZEN_OFFSET(pb_optimizer_update, step, 8);
FROZEN_OFFSET(pb_optimizer_update, lr, 16);
FROZEN_OFFSET(pb_optimizer_update, nesterov, 72);
FROZEN_OFFSET(pb_optimizer_update, grad_scale, 76);
FROZEN_SIZE(pb_optimizer_update, 80);
static_assert(PB_OPTIMIZER_ADAMW == 0 && PB_OPTIMIZER_SGD == 1 && PB_OPTIMIZER_LION == 2);

// ---- enum values ----
static_assert(PB_DTYPE_F32 == 0 && PB_DTYPE_BF16 == 1 && PB_DTYPE_F16 == 2 && PB_DTYPE_I32 == 3 &&
              PB_DTYPE_I64 == 4);
static_assert(PB_DEVICE_CPU == 0 && PB_DEVICE_CUDA == 1);
static_assert(PB_UNARY_NEG == 0 && PB_UNARY_ABS == 1 && PB_UNARY_EXP == 2 && PB_UNARY_LOG == 3 &&
              PB_UNARY_SQRT == 4 && PB_UNARY_RSQRT == 5 && PB_UNARY_TANH == 6 &&
              PB_UNARY_SIGMOID == 7 && PB_UNARY_RELU == 8 && PB_UNARY_GELU_TANH == 9 &&
              PB_UNARY_GELU_ERF == 10 && PB_UNARY_SILU == 11 && PB_UNARY_SOFTMAX == 12 &&
              PB_UNARY_LOG_SOFTMAX == 13);
static_assert(PB_BINARY_ADD == 0 && PB_BINARY_SUB == 1 && PB_BINARY_MUL == 2 && PB_BINARY_DIV == 3);
static_assert(PB_SCALAR_ADD == 0 && PB_SCALAR_MUL == 1 && PB_SCALAR_POW == 2);
static_assert(PB_REDUCE_SUM == 0 && PB_REDUCE_MEAN == 1 && PB_REDUCE_MAX == 2);
static_assert(PB_LOSS_MEAN == 0 && PB_LOSS_SUM == 1 && PB_LOSS_NONE == 2);

TEST_CASE("PB_HAS_FIELD tells a version-2 table from a longer one") {
  pb_ops_table table{};
  table.struct_size = kOpsTableVersion2Size;
  CHECK(PB_HAS_FIELD(&table, pb_ops_table, rotary_embedding));
  table.struct_size = offsetof(pb_ops_table, rotary_embedding);  // a version-1 table
  CHECK(!PB_HAS_FIELD(&table, pb_ops_table, rotary_embedding));
  CHECK(PB_HAS_FIELD(&table, pb_ops_table, memory_stats));
}
