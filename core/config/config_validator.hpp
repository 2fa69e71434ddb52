// Validation of a whole resolved config against the host schema and the chosen
// components' schemas, before any work starts. Reports every problem found (not just the
// first): unknown keys and sections (with the closest valid names and the full list),
// wrong types, values out of range or not among the choices, missing required keys,
// unknown component names (with those available). Each issue carries file:line, key
// path, expected, found and a fix (config_error.hpp).
#pragma once

#include <vector>

#include "config/config_document.hpp"
#include "config/config_error.hpp"
#include "config/schema_registry.hpp"

namespace patchbay::config {

// All issues, in document order per table. `lookup` may be empty: then the keys of
// component sections other than the section's own fields are not checked (there is
// nothing to check them against).
std::vector<ConfigIssue> validate_config(const ResolvedConfig& config, const SchemaRegistry& schema,
                                         const ComponentSchemaLookup& lookup);

// validate_config, throwing ConfigError with every issue when there is any.
void validate_config_or_throw(const ResolvedConfig& config, const SchemaRegistry& schema,
                              const ComponentSchemaLookup& lookup);

// Fills every missing optional key of the present sections (and of the always_present
// sections, created when absent) with its schema default, source kDefaultSource, and puts
// component sections in canonical form (component_options.hpp): each used component's
// options in its own per-kind table ([optimizer.adamw]), flat keys moved there, unused
// per-kind tables set aside in config.ignored(). Used components get their defaults when
// `lookup` finds them. Call after validation succeeded; afterwards every declared key of a
// present section, and of each used component, exists.
void apply_defaults(ResolvedConfig& config, const SchemaRegistry& schema, const ComponentSchemaLookup& lookup);

}  // namespace patchbay::config
