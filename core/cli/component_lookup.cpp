// Component schema lookup for config validation; see component_lookup.hpp. Plugins are
// scanned metadata-only; only the plugin of a component the config names is loaded (its
// descriptor holds the schema), so an unrelated broken plugin cannot fail a config check.
#include "cli/component_lookup.hpp"

#include <spdlog/spdlog.h>

#include "config/config_loader.hpp"
#include "config/config_validator.hpp"
#include "config/host_schema.hpp"
#include "model/language_model.hpp"

#include "runtime/registry.hpp"

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

}  // namespace

ComponentLookup make_component_lookup(const GlobalOptions& global, const config::ResolvedConfig& config) {
  runtime::SearchPathOptions search;
  search.cli_paths = global.plugin_paths;
  search.config_paths = configured_plugin_paths(config);
  auto registry = std::make_shared<runtime::Registry>();
  registry->scan(runtime::plugin_search_path(search), runtime::LoadMode::kMetadataOnly);
  for (const runtime::RefusedPlugin& refused : registry->refused()) spdlog::warn("{}", refused.reason);

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
  // The host sections plus the model's: what `patchbay train` validates too.
  config::SchemaRegistry schema = config::make_host_schema();
  model::declare_model_sections(schema);
  config::validate_config_or_throw(validated.config, schema, validated.components.lookup);
  config::apply_defaults(validated.config, schema, validated.components.lookup);
  return validated;
}

}  // namespace patchbay::cli
