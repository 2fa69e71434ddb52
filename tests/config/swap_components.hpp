// Fixtures of the component-swap tests: fake components of every kind with their own option
// schemas (two per kind, so a swap has somewhere to go), and a schema with the host's
// sections plus layer sections shaped like [model.attention] (kind + pattern) and a
// [parallelism] section, so every kind's swap runs without loading a plugin.
#pragma once

#include <string>

#include "config/host_schema.hpp"
#include "config/schema_registry.hpp"
#include "fake_components.hpp"
#include "patchbay/component.hpp"

namespace patchbay::config::testing {

inline constexpr pb_config_field kFakeAdamwFields[] = {
    Field::real("beta1", "0.9", "first-moment decay").range(0.0, 1.0),
    Field::real("beta2", "0.999", "second-moment decay").range(0.0, 1.0),
    Field::real("weight_decay", "0.0", "decoupled decay").range(0.0, 10.0),
};
inline constexpr pb_config_field kFakeSgdFields[] = {
    Field::real("momentum", "0.0", "momentum").range(0.0, 1.0),
    Field::boolean("nesterov", "false", "Nesterov momentum"),
};
inline constexpr pb_config_field kFakeDenseFields[] = {
    Field::real("dropout", "0.0", "attention dropout").range(0.0, 1.0),
};
inline constexpr pb_config_field kFakeLocalFields[] = {
    Field::integer("window", nullptr, "positions each query sees").required().range(1, 1 << 20),
};
inline constexpr pb_config_field kFakeMlpFields[] = {
    Field::string("activation", "\"gelu\"", "nonlinearity").choices("gelu|relu|swiglu"),
};
inline constexpr pb_config_field kFakeMoeFields[] = {
    Field::integer("experts", "8", "expert count").range(1, 1024),
};
inline constexpr pb_config_field kFakeDataParallelFields[] = {
    Field::integer("bucket_mb", "25", "all-reduce bucket size").range(1, 4096),
};

// Components of every kind: tokenizer bpe/char (fake_components.hpp), optimizer adamw/sgd,
// attention dense/local, feed-forward mlp/moe, parallelism single/data.
inline ComponentSchemaLookup swap_lookup() {
  return [](pb_component_kind kind, std::string_view name) {
    ComponentLookupResult result;
    const auto offer = [&](const char* candidate, std::span<const pb_config_field> fields) {
      result.available.emplace_back(candidate);
      if (name == candidate) result.schema = ComponentSchema{candidate, "fake", fields};
    };
    switch (kind) {
      case PB_KIND_TOKENIZER:
        offer("bpe", kFakeBpeFields);
        offer("char", kFakeCharFields);
        break;
      case PB_KIND_OPTIMIZER:
        offer("adamw", kFakeAdamwFields);
        offer("sgd", kFakeSgdFields);
        break;
      case PB_KIND_ATTENTION:
        offer("dense", kFakeDenseFields);
        offer("local", kFakeLocalFields);
        break;
      case PB_KIND_FEEDFORWARD:
        offer("mlp", kFakeMlpFields);
        offer("moe", kFakeMoeFields);
        break;
      case PB_KIND_PARALLELISM:
        offer("single", {});
        offer("data", kFakeDataParallelFields);
        break;
      default:
        break;
    }
    if (result.schema) result.available.clear();
    return result;
  };
}

inline HostSection component_section(const char* path, pb_component_kind kind, bool with_pattern) {
  HostSection section;
  section.path = path;
  section.summary = "test component section";
  section.component_kind = kind;
  section.fields.push_back(Field::string("kind", nullptr, "component name").required());
  if (with_pattern)
    section.fields.push_back(Field::strings("pattern", "[]", "components cycled over the blocks"));
  return section;
}

// The host's sections plus [model] with [model.attention] / [model.feedforward] (kind and
// pattern, as core/model declares them) and [parallelism].
inline SchemaRegistry swap_schema() {
  SchemaRegistry schema = make_host_schema();
  HostSection model;
  model.path = "model";
  model.summary = "test model";
  model.fields = {Field::integer("n_layers", "2", "blocks").range(1, 64)};
  schema.add_section(std::move(model));
  schema.add_section(component_section("model.attention", PB_KIND_ATTENTION, true));
  schema.add_section(component_section("model.feedforward", PB_KIND_FEEDFORWARD, true));
  schema.add_section(component_section("parallelism", PB_KIND_PARALLELISM, false));
  return schema;
}

}  // namespace patchbay::config::testing
