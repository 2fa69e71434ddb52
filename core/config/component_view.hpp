// Turning a component's options into the C pb_config_view its `create` receives: every key
// of the component's schema, in schema order, holding the user's value or the schema default.
// This is the host's one path from a schema to a pb_config_view: runtime::ComponentConfig
// (typed setters, for code that builds options without a config file) builds its view here
// too. Plugin tests outside the host use patchbay/testing/config_builder.hpp.
//
// Lifetime: ComponentConfigView owns every string and array the view points to; keep it
// alive until `create` returns (the component copies what it keeps). Moving the object
// keeps the view's pointers valid (storage lives on the heap).
#pragma once

#include <memory>
#include <span>
#include <string>

#include <toml++/toml.h>

#include "config/config_document.hpp"
#include "config/schema_registry.hpp"
#include "patchbay/component.h"

namespace patchbay::config {

class ComponentConfigView {
 public:
  // `section` is the component's table (e.g. [tokenizer]); keys not in `fields` (such as
  // `kind`) are ignored. `section_path` names the table in messages. Throws ConfigError
  // when a required key is missing or a value has the wrong type (validation catches
  // both first), patchbay::Error (kInternal) for a default that is not valid TOML.
  ComponentConfigView(const toml::table& section, std::span<const pb_config_field> fields,
                      const std::string& section_path);
  ~ComponentConfigView();
  ComponentConfigView(ComponentConfigView&&) noexcept;
  ComponentConfigView& operator=(ComponentConfigView&&) noexcept;
  ComponentConfigView(const ComponentConfigView&) = delete;
  ComponentConfigView& operator=(const ComponentConfigView&) = delete;

  const pb_config_view* view() const;
  // The value of `key`, or nullptr when the schema has no such key.
  const pb_config_value* find(std::string_view key) const;

 private:
  struct Storage;
  std::unique_ptr<Storage> storage_;
};

// The component a validated config selects in the component section `section_path`
// ("tokenizer"): its name and the view for its `create`, built from the component's options
// (its per-kind table with the flat keys laid over it; component_options.hpp). Throws ConfigError when the
// section or its `kind` is missing or names no known component, patchbay::Error
// (kInternal) when `section_path` is not a component section of `schema`.
struct SelectedComponent {
  std::string name;  // the section's `kind`
  ComponentConfigView config;
};
SelectedComponent select_component(const ResolvedConfig& config, const SchemaRegistry& schema,
                                   const ComponentSchemaLookup& lookup, const std::string& section_path);

}  // namespace patchbay::config
