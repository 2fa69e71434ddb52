// The one validation `patchbay train` and `patchbay config check` share, with the
// [[data.sources]] rules the schema cannot state (issue 35). The schema checks each
// [[data.sources]] entry as an array of tables (core/config/sections/section_data.cpp); this
// adds the rules across keys and entries.
#pragma once

#include "config/config_document.hpp"
#include "config/schema_registry.hpp"

namespace patchbay::train {

// The schema first (every issue at once, config::ConfigError; [[data.sources]] entries
// included), then the [[data.sources]] rules on the keys as written (weight or epochs, not
// both, on every source or none, each > 0; not beside data.prepared: Error(kInvalidArgument)
// naming data.sources[i].key and where it was set), then every default, then the sources
// finished (name "" -> the folder's name, names unique, the unused one of weight / epochs
// removed, so a resolved config validates again to itself).
void validate_with_defaults(config::ResolvedConfig& config, const config::SchemaRegistry& schema,
                            const config::ComponentSchemaLookup& lookup);

}  // namespace patchbay::train
