// Wires config validation (core/config, which knows nothing of plugins) to the plugin
// registry (core/runtime): the component schemas of the loaded plugins, found on the
// search path built from --plugin-path, PATCHBAY_PLUGIN_PATH, the config's
// run.plugin_paths and the built-in folders.
#pragma once

#include <string>

#include "cli/command.hpp"
#include "config/config_document.hpp"
#include "config/schema_registry.hpp"

namespace patchbay::cli {

struct ComponentLookup {
  // Empty when no plugin registry is linked into this build; then component keys are not
  // checked and `unavailable_reason` says why.
  config::ComponentSchemaLookup lookup;
  std::string unavailable_reason;
};

// Loads the plugins the config may name. The returned function keeps them loaded.
ComponentLookup make_component_lookup(const GlobalOptions& global, const config::ResolvedConfig& config);

}  // namespace patchbay::cli
