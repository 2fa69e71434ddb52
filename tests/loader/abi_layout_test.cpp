// Freezes the released ABI layouts (ABI 1.0, LP64 Linux): a change to any size or offset
// below breaks every plugin built against an earlier SDK, so it fails the build here first.
// This file: host api, config, descriptors, tokenizer. The other kinds' interfaces are in
// abi_layout_interfaces_test.cpp, the ops table in ops_table_layout_test.cpp, the sampler in
// tests/samplers/sampler_abi_layout_test.cpp.
// Appending a field in a new minor changes only sizeof(): update the size line, keep every
// offset, and record the bump in sdk/CHANGELOG.md.
#include <doctest/doctest.h>

#include "abi_freeze.hpp"
#include "patchbay/ops.h"
#include "patchbay/plugin.h"
#include "patchbay/tokenizer.h"

static_assert(PB_ABI_VERSION_MAJOR == 1, "the layouts below are those of ABI 1.x");

FROZEN_SIZE(pb_host_api, 80);
FROZEN_OFFSET(pb_host_api, struct_size, 0);
FROZEN_OFFSET(pb_host_api, abi_major, 8);
FROZEN_OFFSET(pb_host_api, abi_minor, 12);
FROZEN_OFFSET(pb_host_api, log, 16);
FROZEN_OFFSET(pb_host_api, alloc, 24);
FROZEN_OFFSET(pb_host_api, free, 32);
FROZEN_OFFSET(pb_host_api, status_create, 40);
FROZEN_OFFSET(pb_host_api, status_code, 48);
FROZEN_OFFSET(pb_host_api, status_message, 56);
FROZEN_OFFSET(pb_host_api, status_free, 64);
FROZEN_OFFSET(pb_host_api, ops, 72);

FROZEN_SIZE(pb_config_field, 72);
FROZEN_OFFSET(pb_config_field, struct_size, 0);
FROZEN_OFFSET(pb_config_field, key, 8);
FROZEN_OFFSET(pb_config_field, type, 16);
FROZEN_OFFSET(pb_config_field, required, 20);
FROZEN_OFFSET(pb_config_field, default_value, 24);
FROZEN_OFFSET(pb_config_field, has_range, 32);
FROZEN_OFFSET(pb_config_field, min_value, 40);
FROZEN_OFFSET(pb_config_field, max_value, 48);
FROZEN_OFFSET(pb_config_field, choices, 56);
FROZEN_OFFSET(pb_config_field, doc, 64);

FROZEN_SIZE(pb_config_value, 64);
FROZEN_OFFSET(pb_config_value, struct_size, 0);
FROZEN_OFFSET(pb_config_value, key, 8);
FROZEN_OFFSET(pb_config_value, type, 16);
FROZEN_OFFSET(pb_config_value, bool_value, 20);
FROZEN_OFFSET(pb_config_value, int_value, 24);
FROZEN_OFFSET(pb_config_value, float_value, 32);
FROZEN_OFFSET(pb_config_value, string_value, 40);
FROZEN_OFFSET(pb_config_value, string_items, 48);
FROZEN_OFFSET(pb_config_value, string_count, 56);

FROZEN_SIZE(pb_config_view, 24);
FROZEN_OFFSET(pb_config_view, values, 8);
FROZEN_OFFSET(pb_config_view, count, 16);

FROZEN_SIZE(pb_component_descriptor, 88);
FROZEN_OFFSET(pb_component_descriptor, struct_size, 0);
FROZEN_OFFSET(pb_component_descriptor, kind, 8);
FROZEN_OFFSET(pb_component_descriptor, interface_major, 12);
FROZEN_OFFSET(pb_component_descriptor, interface_minor, 16);
FROZEN_OFFSET(pb_component_descriptor, name, 24);
FROZEN_OFFSET(pb_component_descriptor, version, 32);
FROZEN_OFFSET(pb_component_descriptor, summary, 40);
FROZEN_OFFSET(pb_component_descriptor, config_fields, 48);
FROZEN_OFFSET(pb_component_descriptor, config_field_count, 56);
FROZEN_OFFSET(pb_component_descriptor, create, 64);
FROZEN_OFFSET(pb_component_descriptor, destroy, 72);
FROZEN_OFFSET(pb_component_descriptor, vtable, 80);

FROZEN_SIZE(pb_plugin_descriptor, 64);
FROZEN_OFFSET(pb_plugin_descriptor, struct_size, 0);
FROZEN_OFFSET(pb_plugin_descriptor, abi_major, 8);
FROZEN_OFFSET(pb_plugin_descriptor, abi_minor, 12);
FROZEN_OFFSET(pb_plugin_descriptor, min_host_major, 16);
FROZEN_OFFSET(pb_plugin_descriptor, min_host_minor, 20);
FROZEN_OFFSET(pb_plugin_descriptor, min_host_patch, 24);
FROZEN_OFFSET(pb_plugin_descriptor, name, 32);
FROZEN_OFFSET(pb_plugin_descriptor, version, 40);
FROZEN_OFFSET(pb_plugin_descriptor, components, 48);
FROZEN_OFFSET(pb_plugin_descriptor, component_count, 56);

FROZEN_SIZE(pb_tokenizer_vtable, 80);
FROZEN_OFFSET(pb_tokenizer_vtable, capabilities, 8);
FROZEN_OFFSET(pb_tokenizer_vtable, train, 16);
FROZEN_OFFSET(pb_tokenizer_vtable, vocab_size, 24);
FROZEN_OFFSET(pb_tokenizer_vtable, encode, 32);
FROZEN_OFFSET(pb_tokenizer_vtable, decode, 40);
FROZEN_OFFSET(pb_tokenizer_vtable, special_token_count, 48);
FROZEN_OFFSET(pb_tokenizer_vtable, special_token, 56);
FROZEN_OFFSET(pb_tokenizer_vtable, save, 64);
FROZEN_OFFSET(pb_tokenizer_vtable, load, 72);

// The enum values are part of the ABI too.
static_assert(PB_KIND_TOKENIZER == 1 && PB_KIND_SAMPLER == 6);
static_assert(PB_TYPE_BOOL == 1 && PB_TYPE_STRING_ARRAY == 5);
static_assert(PB_STATUS_OK == 0 && PB_STATUS_INTERNAL == 8);

namespace {
// A pb_config_value as a later minor might define it: one field appended.
struct ConfigValueNextMinor {
  pb_config_value v10;
  double appended;
};
}  // namespace

TEST_CASE("PB_ARRAY_AT walks an array with the producer's struct_size, not the reader's") {
  ConfigValueNextMinor values[3] = {};
  for (int i = 0; i < 3; ++i) {
    values[i].v10.struct_size = sizeof(ConfigValueNextMinor);
    values[i].v10.int_value = 10 + i;
  }
  const pb_config_value* base = &values[0].v10;
  CHECK(PB_ARRAY_AT(pb_config_value, base, 2)->int_value == 12);
  CHECK(PB_HAS_FIELD(base, pb_config_value, string_count));
}

// Ops table version 3: the options of attention_with_options (fields are only appended).
FROZEN_SIZE(pb_attention_options, 64);  // version 4: block_layout, block_size appended;
                                        // version 13: segment_ids appended
FROZEN_OFFSET(pb_attention_options, segment_ids, 56);
FROZEN_OFFSET(pb_attention_options, block_layout, 40);
FROZEN_OFFSET(pb_attention_options, block_size, 48);
FROZEN_OFFSET(pb_attention_options, struct_size, 0);
FROZEN_OFFSET(pb_attention_options, causal, 8);
FROZEN_OFFSET(pb_attention_options, scale, 16);
FROZEN_OFFSET(pb_attention_options, window, 24);
FROZEN_OFFSET(pb_attention_options, alibi_slopes, 32);
