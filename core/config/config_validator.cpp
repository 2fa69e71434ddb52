// Whole-config validation and defaults; see config_validator.hpp.
//
// The walk starts at the top-level table (a pseudo-section whose only valid keys are the
// top-level sections) and descends into every declared section that is present. For each
// table the valid keys are: the section's own fields, the selected component's fields
// (component sections), and the names of its child sections.
#include "config/config_validator.hpp"

#include <algorithm>
#include <string>
#include <tuple>

#include "config/closest_names.hpp"
#include "config/field_schema.hpp"
#include "config/type_names.hpp"

namespace patchbay::config {
namespace {

std::string section_header(const std::string& path) { return path.empty() ? "the top level" : "[" + path + "]"; }

class Validator {
 public:
  Validator(const ResolvedConfig& config, const SchemaRegistry& schema, const ComponentSchemaLookup& lookup)
      : config_(config), schema_(schema), lookup_(lookup) {}

  // Sorted by file, then line: TOML++ tables iterate keys alphabetically, users read files
  // top to bottom.
  std::vector<ConfigIssue> run() {
    validate_table("", config_.table(), nullptr);
    std::stable_sort(issues_.begin(), issues_.end(), [](const ConfigIssue& a, const ConfigIssue& b) {
      return std::tie(a.where.file, a.where.line) < std::tie(b.where.file, b.where.line);
    });
    return std::move(issues_);
  }

 private:
  void validate_table(const std::string& path, const toml::table& table, const HostSection* section) {
    std::vector<const pb_config_field*> fields;
    if (section != nullptr) {
      for (const pb_config_field& field : section->fields) fields.push_back(&field);
    }
    // Component sections: resolve the component first, so its keys count as valid.
    bool component_keys_unchecked = false;
    std::string component_label;
    if (section != nullptr && section->component_kind) {
      const std::optional<ComponentSchema> component = resolve_component(path, table, *section);
      if (component) {
        component_label = std::string(" (") + component_kind_name(*section->component_kind) + " '" +
                          component->name + "')";
        for (const pb_config_field& field : component->fields) fields.push_back(&field);
      } else {
        component_keys_unchecked = true;  // nothing to check the other keys against
      }
    }
    const std::vector<std::string> child_sections = schema_.child_section_names(path);

    std::vector<std::string> valid_keys;
    for (const pb_config_field* field : fields) valid_keys.emplace_back(field->key);
    for (const std::string& child : child_sections) valid_keys.push_back(child);

    for (const auto& [key, node] : table) {
      const std::string key_path = join_key_path(path, key.str());
      if (const pb_config_field* field = find_field(fields, key.str())) {
        check_field_value(*field, key_path, node);
        continue;
      }
      if (is_child_section(child_sections, key.str())) {
        const HostSection* child = schema_.find(path.empty() ? std::string(key.str())
                                                             : path + "." + std::string(key.str()));
        if (const toml::table* child_table = node.as_table()) {
          validate_table(key_path, *child_table, child);
        } else {
          add_issue(key_path, "wrong type", "a table [" + child->path + "] (" + child->summary + ")",
                    describe_value(node), "write the settings under a [" + child->path + "] header");
        }
        continue;
      }
      if (component_keys_unchecked) continue;
      report_unknown_key(path, key_path, std::string(key.str()), valid_keys, component_label);
    }

    for (const pb_config_field* field : fields) {
      if (!field->required || table.contains(field->key)) continue;
      ConfigIssue issue;
      issue.where = config_.locate(path);
      issue.key_path = join_key_path(path, field->key);
      issue.problem = "missing required key";
      issue.expected = describe_expectation(*field) + (field->doc ? std::string(": ") + field->doc : "");
      issue.found = "no '" + std::string(field->key) + "' in " + section_header(path) + component_label;
      issue.fix = "add " + std::string(field->key) + " = <" + schema_type_name(field->type) + "> under " +
                  section_header(path);
      issues_.push_back(std::move(issue));
    }
  }

  // The component a component section selects, or nullopt (issue reported, or no lookup).
  std::optional<ComponentSchema> resolve_component(const std::string& path, const toml::table& table,
                                                   const HostSection& section) {
    const toml::node* selector = table.get(kComponentSelectorKey);
    if (selector == nullptr || !selector->is_string() || !lookup_) return std::nullopt;
    const std::string name = selector->as_string()->get();
    const pb_component_kind kind = *section.component_kind;
    ComponentLookupResult found = lookup_(kind, name);
    if (!found.schema) {
      const std::vector<std::string> close = closest_names(name, found.available);
      ConfigIssue issue;
      issue.where = config_.locate(join_key_path(path, kComponentSelectorKey));
      issue.key_path = join_key_path(path, kComponentSelectorKey);
      issue.problem = std::string("unknown ") + component_kind_name(kind) + " component '" + name + "'";
      issue.expected = found.available.empty()
                           ? std::string("the name of a loaded ") + component_kind_name(kind) + " (none found)"
                           : "one of the available " + std::string(component_kind_name(kind)) +
                                 " components: " + join_names(found.available);
      issue.found = describe_value(*selector);
      const std::string add_plugin = "add the plugin providing '" + name +
                                     "' to the plugin path (--plugin-path or run.plugin_paths)";
      issue.fix =
          !close.empty() ? "did you mean " + quote_alternatives(close) + "? If not, " + add_plugin
          : found.available.empty() ? add_plugin
                                    : "choose one of the available components, or " + add_plugin;
      issues_.push_back(std::move(issue));
      return std::nullopt;
    }
    const std::vector<std::string> problems = check_field_declarations(found.schema->fields);
    for (const std::string& problem : problems) {
      ConfigIssue issue;
      issue.where = config_.locate(join_key_path(path, kComponentSelectorKey));
      issue.key_path = path;
      issue.problem = std::string(component_kind_name(kind)) + " component '" + name +
                      "' declares a broken config schema";
      issue.expected = "a valid pb_config_field list";
      issue.found = problem + (found.schema->origin.empty() ? "" : " (in " + found.schema->origin + ")");
      issue.fix = "report this to the plugin's author, or choose another component";
      issues_.push_back(std::move(issue));
    }
    if (!problems.empty()) return std::nullopt;
    // A component key that shadows a host key of the section could never be set.
    for (const pb_config_field& field : found.schema->fields) {
      for (const pb_config_field& host_field : section.fields) {
        if (std::string_view(field.key) != host_field.key) continue;
        add_issue(path, std::string(component_kind_name(kind)) + " component '" + name + "' declares key '" +
                            field.key + "', which the host already uses in [" + path + "]",
                  "component keys distinct from the section's own keys", field.key,
                  "report this to the plugin's author");
        return std::nullopt;
      }
    }
    return found.schema;
  }

  void check_field_value(const pb_config_field& field, const std::string& key_path, const toml::node& node) {
    const std::optional<ValueProblem> problem = check_value(field, node);
    if (!problem) return;
    ConfigIssue issue;
    issue.key_path = key_path + problem->item_suffix;
    issue.where = config_.locate(issue.key_path);
    issue.problem = problem->problem;
    issue.expected = problem->expected + (field.doc ? std::string(" (") + field.doc + ")" : "");
    issue.found = problem->found;
    issue.fix = problem->fix;
    issues_.push_back(std::move(issue));
  }

  void report_unknown_key(const std::string& path, const std::string& key_path, const std::string& key,
                          const std::vector<std::string>& valid_keys, const std::string& component_label) {
    const std::vector<std::string> close = closest_names(key, valid_keys);
    ConfigIssue issue;
    issue.where = config_.locate(key_path);
    issue.key_path = key_path;
    issue.problem = path.empty() ? "unknown section" : "unknown key";
    issue.expected = valid_keys.empty() ? "no keys in " + section_header(path)
                                        : (path.empty() ? "one of the sections: " : "one of the keys of " +
                                                                                        section_header(path) +
                                                                                        component_label + ": ") +
                                              join_names(valid_keys);
    issue.found = "'" + key + "'";
    issue.fix = close.empty() ? "remove it, or use one of the valid names"
                              : "did you mean " + quote_alternatives(close) + "? rename it, or remove it";
    issues_.push_back(std::move(issue));
  }

  void add_issue(const std::string& key_path, std::string problem, std::string expected, std::string found,
                 std::string fix) {
    ConfigIssue issue;
    issue.where = config_.locate(key_path);
    issue.key_path = key_path;
    issue.problem = std::move(problem);
    issue.expected = std::move(expected);
    issue.found = std::move(found);
    issue.fix = std::move(fix);
    issues_.push_back(std::move(issue));
  }

  static const pb_config_field* find_field(const std::vector<const pb_config_field*>& fields, std::string_view key) {
    for (const pb_config_field* field : fields) {
      if (key == field->key) return field;
    }
    return nullptr;
  }

  static bool is_child_section(const std::vector<std::string>& children, std::string_view key) {
    for (const std::string& child : children) {
      if (child == key) return true;
    }
    return false;
  }

  const ResolvedConfig& config_;
  const SchemaRegistry& schema_;
  const ComponentSchemaLookup& lookup_;
  std::vector<ConfigIssue> issues_;
};

void fill_defaults(ResolvedConfig& config, toml::table& table, const std::string& path,
                   std::span<const pb_config_field> fields) {
  for (const pb_config_field& field : fields) {
    if (table.contains(field.key)) continue;
    std::optional<toml::table> parsed = parse_default(field);
    if (!parsed) continue;
    table.insert(field.key, std::move(*parsed->get("value")));
    record_sources_at(*table.get(field.key), join_key_path(path, field.key), SourceLocation{kDefaultSource, 0},
                      config.sources());
  }
}

// Tables are found by walking the section path word by word (section paths are bare).
toml::table* find_or_create_section(ResolvedConfig& config, const HostSection& section, bool create) {
  toml::table* table = &config.table();
  std::string path;
  std::string_view rest = section.path;
  while (!rest.empty()) {
    const size_t dot = rest.find('.');
    const std::string key(rest.substr(0, dot));
    rest = dot == std::string_view::npos ? std::string_view() : rest.substr(dot + 1);
    path = join_key_path(path, key);
    toml::node* node = table->get(key);
    if (node == nullptr) {
      if (!create) return nullptr;
      table->insert(key, toml::table{});
      config.sources()[path] = SourceLocation{kDefaultSource, 0};
      node = table->get(key);
    }
    table = node->as_table();
    if (table == nullptr) return nullptr;
  }
  return table;
}

}  // namespace

std::vector<ConfigIssue> validate_config(const ResolvedConfig& config, const SchemaRegistry& schema,
                                         const ComponentSchemaLookup& lookup) {
  return Validator(config, schema, lookup).run();
}

void validate_config_or_throw(const ResolvedConfig& config, const SchemaRegistry& schema,
                              const ComponentSchemaLookup& lookup) {
  std::vector<ConfigIssue> issues = validate_config(config, schema, lookup);
  if (!issues.empty()) throw ConfigError(std::move(issues));
}

void apply_defaults(ResolvedConfig& config, const SchemaRegistry& schema, const ComponentSchemaLookup& lookup) {
  // Parents are declared before children, so creating in declaration order works.
  for (const HostSection& section : schema.sections()) {
    toml::table* table = find_or_create_section(config, section, section.always_present);
    if (table == nullptr) continue;
    fill_defaults(config, *table, section.path, section.fields);
    if (!section.component_kind || !lookup) continue;
    const toml::node* selector = table->get(kComponentSelectorKey);
    if (selector == nullptr || !selector->is_string()) continue;
    const ComponentLookupResult found = lookup(*section.component_kind, selector->as_string()->get());
    if (found.schema) fill_defaults(config, *table, section.path, found.schema->fields);
  }
}

}  // namespace patchbay::config
