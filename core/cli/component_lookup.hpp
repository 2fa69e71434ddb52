// Wires config validation (core/config, which knows nothing of plugins) to the plugin
// registry (core/runtime): the component schemas of the plugins found on the search path
// built from --plugin-path, PATCHBAY_PLUGIN_PATH, the config's run.plugin_paths and the
// built-in folders. Also the one call commands use to get a config ready for work.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "cli/command.hpp"
#include "config/config_document.hpp"
#include "config/schema_registry.hpp"

namespace patchbay::runtime {
class Registry;
}
namespace patchbay::train {
class Checkpoint;
}

namespace patchbay::cli {

struct ComponentLookup {
  // Empty when no plugin registry is linked into this build; then component keys are not
  // checked and `unavailable_reason` says why.
  config::ComponentSchemaLookup lookup;
  std::string unavailable_reason;
  // The registry behind `lookup` (null without one): use it to create the components the
  // config names. The plugins whose schemas were read stay loaded while it lives.
  std::shared_ptr<runtime::Registry> registry;
};

// What a run recorded about its plugins in its checkpoints: the absolute search path it used
// and, per component, the plugin file it came from (train/checkpoint.hpp). Empty for
// checkpoints written before the record existed.
struct RecordedPlugins {
  struct Component {
    std::string kind;  // "attention"
    std::string name;
    std::string file;  // absolute path of the plugin file at training time
  };
  std::vector<std::string> search_path;
  std::vector<Component> components;
};
RecordedPlugins recorded_plugins(const train::Checkpoint& checkpoint);

// Scans the plugin search path (metadata only) for the components the config may name.
// With `recorded` (generate, eval, train --resume), the run's plugin files and search path
// come after --plugin-path, PATCHBAY_PLUGIN_PATH and the config's run.plugin_paths and before
// the built-in folders, so a run finds its plugins again without --plugin-path; a recorded
// component found nowhere is an error naming the file it came from.
ComponentLookup make_component_lookup(const GlobalOptions& global, const config::ResolvedConfig& config,
                                      const RecordedPlugins& recorded = {});

struct ValidatedConfig {
  config::ResolvedConfig config;  // valid, every default filled in
  ComponentLookup components;
};

// Loads `file` with its includes and `overrides`, validates it against the host schema and
// the components it names (throws config::ConfigError listing every problem: exit code
// kExitConfig), then fills in the defaults. The way every command that takes a config
// starts.
ValidatedConfig load_validated_config(const std::string& file, const std::vector<std::string>& overrides,
                                      const GlobalOptions& global);

}  // namespace patchbay::cli
