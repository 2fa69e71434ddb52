// Per-kind options of component sections; see component_options.hpp.
#include "config/component_options.hpp"

#include <algorithm>

#include "config/closest_names.hpp"
#include "config/field_schema.hpp"
#include "config/type_names.hpp"

namespace patchbay::config {
namespace {

bool contains(std::span<const std::string> names, std::string_view name) {
  return std::find(names.begin(), names.end(), name) != names.end();
}

std::string quoted_kind(const toml::table& section) {
  const toml::node* kind = section.get(kComponentSelectorKey);
  return kind != nullptr && kind->is_string() ? "\"" + kind->as_string()->get() + "\"" : "(none)";
}

}  // namespace

std::vector<std::string> host_key_names(const HostSection& section) {
  std::vector<std::string> names;
  for (const pb_config_field& field : section.fields) names.emplace_back(field.key);
  return names;
}

std::vector<std::string> used_component_names(const toml::table& section,
                                              std::span<const std::string> host_keys,
                                              std::span<const std::string> also_used) {
  std::vector<std::string> names;
  if (const toml::node* kind = section.get(kComponentSelectorKey);
      kind != nullptr && kind->is_string()) {
    names.push_back(kind->as_string()->get());
  }
  const toml::node* pattern =
      contains(host_keys, kComponentPatternKey) ? section.get(kComponentPatternKey) : nullptr;
  if (pattern != nullptr && pattern->is_array()) {
    for (const toml::node& item : *pattern->as_array()) {
      if (!item.is_string()) continue;
      const std::string& name = item.as_string()->get();
      if (!contains(names, name)) names.push_back(name);
    }
  }
  for (const std::string& name : also_used)
    if (!contains(names, name)) names.push_back(name);
  return names;
}

std::vector<std::string> kinds_used_elsewhere(const toml::table& root,
                                              std::string_view section_path) {
  std::vector<std::string> names;
  const toml::table* model = root.get_as<toml::table>("model");
  if (model == nullptr) return names;
  const toml::node* architecture = model->get("architecture");
  if (architecture == nullptr || !architecture->is_string() ||
      architecture->as_string()->get() != "encoder_decoder")
    return names;
  auto add = [&](const toml::node* node) {
    if (node != nullptr && node->is_string() && !contains(names, node->as_string()->get()))
      names.push_back(node->as_string()->get());
  };
  if (section_path == "model.attention") add(model->get("cross_attention"));
  if (section_path == "model.feedforward")
    for (const char* key : {"encoder_feedforward", "decoder_feedforward"})
      if (const toml::array* kinds = model->get_as<toml::array>(key))
        for (const toml::node& kind : *kinds) add(&kind);
  return names;
}

toml::table component_options(const toml::table& section, std::string_view name,
                              std::span<const std::string> host_keys,
                              std::string_view selector_key) {
  toml::table options;
  if (const toml::node* own = section.get(name); own != nullptr && own->is_table()) {
    options = *own->as_table();
  }
  const toml::node* kind = section.get(selector_key);
  if (kind == nullptr || !kind->is_string() || kind->as_string()->get() != name) return options;
  for (const auto& [key, node] : section) {
    if (node.is_table() || contains(host_keys, key.str())) continue;
    options.insert_or_assign(key, node);  // a flat key wins over the per-kind table
  }
  return options;
}

void canonicalize_component_section(ResolvedConfig& config, toml::table& section,
                                    const std::string& section_path,
                                    std::span<const std::string> host_keys,
                                    const std::string& kind_label) {
  const std::vector<std::string> used =
      used_component_names(section, host_keys, kinds_used_elsewhere(config.table(), section_path));
  ResolvedConfig::SourceMap& sources = config.sources();

  // Options of every used component, their sources re-keyed under the per-kind table.
  std::vector<std::pair<std::string, toml::table>> resolved;
  ResolvedConfig::SourceMap resolved_sources;
  const std::string kind =
      used.empty() || !section.contains(kComponentSelectorKey) ? std::string() : used.front();
  for (const std::string& name : used) {
    const std::string table_path = join_key_path(section_path, name);
    toml::table options = component_options(section, name, host_keys);
    copy_sources_under(sources, table_path, resolved_sources);
    if (!resolved_sources.count(table_path))
      resolved_sources[table_path] = config.locate(section_path);
    if (name == kind) {
      for (const auto& [key, node] : section) {
        if (node.is_table() || contains(host_keys, key.str())) continue;
        const std::string flat_path = join_key_path(section_path, key.str());
        const std::string moved_path = join_key_path(table_path, key.str());
        erase_sources_under(resolved_sources, moved_path);
        for (auto it = sources.lower_bound(flat_path); it != sources.end(); ++it) {
          if (it->first.compare(0, flat_path.size(), flat_path) != 0) break;
          if (key_path_is_under(it->first, flat_path)) {
            resolved_sources[moved_path + it->first.substr(flat_path.size())] = it->second;
          }
        }
      }
    }
    resolved.emplace_back(name, std::move(options));
  }

  // Rebuild: host keys stay, flat keys and per-kind tables go, unused tables are set aside.
  std::vector<std::string> removed;
  for (const auto& [key, node] : section) {
    if (contains(host_keys, key.str())) continue;
    removed.emplace_back(key.str());
    if (!node.is_table() || contains(used, key.str())) continue;
    ResolvedConfig::IgnoredTable ignored;
    ignored.section_path = section_path;
    ignored.name = std::string(key.str());
    ignored.reason =
        "not used: " + kind_label + " kind = " + quoted_kind(section) +
        (contains(host_keys, kComponentPatternKey) && section.contains(kComponentPatternKey)
             ? " and not in pattern"
             : "");
    ignored.table = *node.as_table();
    copy_sources_under(sources, join_key_path(section_path, key.str()), ignored.sources);
    config.ignored().push_back(std::move(ignored));
  }
  for (const std::string& key : removed) {
    section.erase(key);
    erase_sources_under(sources, join_key_path(section_path, key));
  }
  for (auto& [name, options] : resolved) section.insert(name, std::move(options));
  for (auto& [path, where] : resolved_sources) sources[path] = where;
}

std::vector<std::string> option_problems(const toml::table& options,
                                         std::span<const pb_config_field> fields,
                                         bool check_required) {
  std::vector<std::string> problems;
  std::vector<std::string> valid;
  for (const pb_config_field& field : fields) valid.emplace_back(field.key);
  for (const auto& [key, node] : options) {
    const std::string_view name = key.str();  // (clang 14, the fuzz build, cannot capture bindings)
    const auto field = std::find_if(fields.begin(), fields.end(),
                                    [&](const pb_config_field& f) { return name == f.key; });
    if (field == fields.end()) {
      const std::vector<std::string> close = closest_names(key.str(), valid);
      problems.push_back(
          "unknown key '" + std::string(key.str()) + "'" +
          (close.empty() ? std::string() : " (did you mean " + quote_alternatives(close) + "?)") +
          "; valid keys: " + (valid.empty() ? std::string("none") : join_names(valid)));
      continue;
    }
    if (const std::optional<ValueProblem> problem = check_value(*field, node)) {
      problems.push_back("key '" + std::string(key.str()) + problem->item_suffix +
                         "': " + problem->problem + ": expected " + problem->expected + ", found " +
                         problem->found + "; " + problem->fix);
    }
  }
  if (check_required) {
    for (const pb_config_field& field : fields) {
      if (field.required && !options.contains(field.key)) {
        problems.push_back("missing required key '" + std::string(field.key) + "' (" +
                           describe_expectation(field) + ")");
      }
    }
  }
  return problems;
}

}  // namespace patchbay::config
