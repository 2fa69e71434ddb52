// Construction helpers shared by the model builders of core/model (model_build.cpp: the
// decoder-only / encoder LanguageModel; encoder_decoder_build.cpp: the encoder–decoder):
// the engine's ops table in the registry, parameter initialisation, the pb_layer_context a
// plugin layer is initialised with, and the per-component options of a layer section.
// Private to core/model.
#pragma once

#include <toml++/toml.h>

#include <map>
#include <span>
#include <string>
#include <vector>

#include "engine/generator.hpp"
#include "engine/tensor.hpp"
#include "model/language_model.hpp"
#include "patchbay/model_layer.h"
#include "runtime/registry.hpp"

namespace patchbay::model::build_support {

// Puts the engine's ops table in the registry's host api (once per process); throws
// Error(kInternal) when the api carries another table.
void attach_engine(const runtime::Registry& registry);

// A leaf requiring grad, N(0, std) drawn on the CPU from `gen` then moved to `device` (one
// seed gives the same model on every device).
engine::Tensor normal_parameter(const engine::Shape& shape, double std, engine::Generator& gen,
                                engine::Device device);
// A leaf requiring grad filled with `value`.
engine::Tensor constant_parameter(const engine::Shape& shape, double value, engine::Device device);

// What one layer's init() marked with tp_mark_partitioned (the layer context's tp_host).
struct LayerPartitions {
  const pb_host_api* host = nullptr;
  int64_t tp_size = 1;
  std::map<std::string, TensorParallelPartition> marked;  // by the layer's parameter name
};

// The context plugin layer `layer` of `o` is initialised with (d_model, heads, causal,
// positions, init stds, seed, device, tensor parallelism).
pb_layer_context layer_context(const ModelOptions& o, int64_t layer, uint64_t seed,
                               LayerPartitions& partitions);

std::span<const pb_config_field> schema_of(const runtime::ComponentEntry& entry);

// The options each distinct component of a layer section ([model.attention],
// [model.feedforward]) receives, checked against its own schema: flat keys belong to `kind`
// (or `default_kind` when the table has none), other components read [section.<kind>].
std::map<std::string, toml::table> layer_options(
    const toml::table& given, const std::vector<std::string>& kinds,
    const std::vector<const runtime::ComponentEntry*>& entries, const std::string& section,
    const char* default_kind);

}  // namespace patchbay::model::build_support
