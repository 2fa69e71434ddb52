// The schema a whole config is validated against.
//
// The host declares its own sections ([run], [data], [tokenizer], later [model], [train])
// with the same pb_config_field records components use (patchbay::Field). A section
// whose `component_kind` is set selects a component with its `kind` key: for
// `[tokenizer] kind = "bpe"` the valid keys of [tokenizer] are the section's own fields
// (`kind`) plus the fields of the tokenizer component named "bpe", whose schema the
// validator asks a ComponentSchemaLookup for. Sections nest by dotted path
// ("model.attention"): a section's valid keys also include its child sections' names. A
// section may be an array of tables (`[[data.sources]]`): its value is then a non-empty array
// whose every entry is a table checked against the section's fields, with key paths
// "data.sources[i].key".
//
// core/config does not know where components come from; the CLI wires the lookup to the
// plugin registry (core/runtime).
#pragma once

#include <functional>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "patchbay/component.h"

namespace patchbay::config {

// The key of a component section that names the component.
inline constexpr const char* kComponentSelectorKey = "kind";

// "tokenizer", "attention", ... for messages; "component" for an unknown value.
const char* component_kind_name(pb_component_kind kind);

struct ComponentSchema {
  std::string name;                         // "bpe"
  std::string origin;                       // where it comes from, for messages: plugin file
  std::span<const pb_config_field> fields;  // borrowed: lives while the plugin is loaded
};

struct ComponentLookupResult {
  std::optional<ComponentSchema> schema;  // set when found
  std::vector<std::string> available;     // the names of this kind on offer (when not found)
};

// Finds the component of `kind` called `name`. Called during validation only.
using ComponentSchemaLookup =
    std::function<ComponentLookupResult(pb_component_kind kind, std::string_view name)>;

struct HostSection {
  std::string path;     // "run", "tokenizer", "model.attention"
  std::string summary;  // one line
  std::vector<pb_config_field> fields;
  // When set, the table's `kind` key (declared among `fields`) names a component of this
  // kind whose fields are valid in the same table.
  std::optional<pb_component_kind> component_kind;
  // apply_defaults creates the section with its defaults when the config lacks it
  // (sections every run has, like [run]).
  bool always_present = false;
  // The value is an array of tables ([[path]]), each entry checked against `fields` and given
  // their defaults; not a component section, never created when absent.
  bool array_of_tables = false;
};

class SchemaRegistry {
 public:
  // Adds a section. Throws patchbay::Error (kInternal) on a duplicate path, a section
  // whose parent is not declared yet, or a malformed field (bad default literal, ...).
  void add_section(HostSection section);

  const HostSection* find(std::string_view path) const;  // nullptr when not declared
  // Names (last path word) of the sections directly under `parent` ("" for top level).
  std::vector<std::string> child_section_names(std::string_view parent) const;
  const std::vector<HostSection>& sections() const { return sections_; }

 private:
  std::vector<HostSection> sections_;
};

}  // namespace patchbay::config
