// Component schema lookup for config validation; see component_lookup.hpp. Plugins are
// scanned metadata-only; only the plugin of a component the config names is loaded (its
// descriptor holds the schema), so an unrelated broken plugin cannot fail a config check.
#include "cli/component_lookup.hpp"

#include <spdlog/spdlog.h>

#include "config/config_loader.hpp"
#include "config/config_validator.hpp"

#include "runtime/registry.hpp"
#include "train/checkpoint.hpp"
#include "train/objective.hpp"
#include "train/data_sources_config.hpp"
#include "train/train_config.hpp"

#include <filesystem>
#include <nlohmann/json.hpp>

namespace patchbay::cli {

namespace {

// run.plugin_paths as written (validation reports a wrong type; here it is skipped).
std::vector<std::string> configured_plugin_paths(const config::ResolvedConfig& config) {
  std::vector<std::string> paths;
  const toml::node* node = config.find("run.plugin_paths");
  if (node == nullptr || !node->is_array()) return paths;
  for (const toml::node& item : *node->as_array()) {
    if (item.is_string()) paths.push_back(item.as_string()->get());
  }
  return paths;
}

// Throws when a component the run used is on no plugin of `registry`, naming the file the
// run loaded it from and whether that file is gone.
void check_recorded_components(const runtime::Registry& registry, const RecordedPlugins& recorded) {
  for (const RecordedPlugins::Component& used : recorded.components) {
    bool found = false;
    for (const auto& plugin : registry.plugins()) {
      for (const runtime::ComponentEntry& c : plugin->components)
        found = found || (runtime::kind_name(c.kind) == used.kind && c.name == used.name);
    }
    if (found) continue;
    std::error_code ec;
    const bool exists = std::filesystem::exists(used.file, ec);
    throw Error(ErrorKind::kComponentNotFound,
                "this run used " + used.kind + " '" + used.name + "' from the plugin file '" + used.file + "', " +
                    (exists ? std::string("which is still there but no longer provides it (rebuilt with other "
                                          "components?)")
                            : std::string("which no longer exists (moved or deleted)")) +
                    "; rebuild the plugin at that path, or give its new location with --plugin-path FILE_OR_DIR");
  }
}

}  // namespace

RecordedPlugins recorded_plugins(const train::Checkpoint& checkpoint) {
  RecordedPlugins recorded;
  const auto& meta = checkpoint.metadata();
  try {
    if (const auto it = meta.find(train::kMetaPluginSearchPath); it != meta.end()) {
      for (const auto& entry : nlohmann::json::parse(it->second)) recorded.search_path.push_back(entry.get<std::string>());
    }
    if (const auto it = meta.find(train::kMetaComponents); it != meta.end()) {
      for (const auto& c : nlohmann::json::parse(it->second)) {
        recorded.components.push_back(
            {c.at("kind").get<std::string>(), c.at("name").get<std::string>(), c.at("plugin_file").get<std::string>()});
      }
    }
  } catch (const nlohmann::json::exception& e) {
    throw Error(ErrorKind::kInvalidArgument, "checkpoint '" + checkpoint.path().string() +
                                                 "': its plugin record is not valid JSON (" + e.what() + ")");
  }
  return recorded;
}

ComponentLookup make_component_lookup(const GlobalOptions& global, const config::ResolvedConfig& config,
                                      const RecordedPlugins& recorded) {
  runtime::SearchPathOptions search;
  search.cli_paths = global.plugin_paths;
  search.config_paths = configured_plugin_paths(config);
  // The run's own plugin files first (exactly what it loaded), then the folders it searched.
  for (const RecordedPlugins::Component& c : recorded.components) search.config_paths.push_back(c.file);
  search.config_paths.insert(search.config_paths.end(), recorded.search_path.begin(), recorded.search_path.end());
  auto registry = std::make_shared<runtime::Registry>();
  registry->scan(runtime::plugin_search_path(search), runtime::LoadMode::kMetadataOnly);
  for (const runtime::RefusedPlugin& refused : registry->refused()) spdlog::warn("{}", refused.reason);
  check_recorded_components(*registry, recorded);

  ComponentLookup result;
  result.registry = registry;
  result.lookup = [registry](pb_component_kind kind, std::string_view name) {
    config::ComponentLookupResult found;
    for (const auto& plugin : registry->plugins()) {
      for (const runtime::ComponentEntry& component : plugin->components) {
        if (component.kind != kind || component.name != name) continue;
        const runtime::ComponentEntry& loaded = registry->find(kind, name);  // loads the plugin
        found.schema = config::ComponentSchema{
            loaded.name, registry->plugin_of(loaded).file.string(),
            std::span<const pb_config_field>(loaded.descriptor->config_fields,
                                             loaded.descriptor->config_field_count)};
        return found;
      }
    }
    for (const auto& plugin : registry->plugins()) {
      for (const runtime::ComponentEntry& component : plugin->components) {
        if (component.kind == kind) found.available.push_back(component.name);
      }
    }
    return found;
  };
  return result;
}


ValidatedConfig load_validated_config(const std::string& file, const std::vector<std::string>& overrides,
                                      const GlobalOptions& global) {
  ValidatedConfig validated{config::load_config(file, overrides), {}};
  validated.components = make_component_lookup(global, validated.config);
  if (!validated.components.lookup) spdlog::warn("{}", validated.components.unavailable_reason);
  // The host sections plus the model's and the objectives': what `patchbay train` validates too.
  const config::SchemaRegistry schema = train::make_training_schema();
  train::find_objective(train::objective_name(validated.config));  // a known train.objective
  train::validate_with_defaults(validated.config, schema, validated.components.lookup);  // as train does
  return validated;
}

}  // namespace patchbay::cli
