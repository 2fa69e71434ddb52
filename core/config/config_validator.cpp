// Whole-config validation and defaults; see config_validator.hpp.
//
// The walk starts at the top-level table (a pseudo-section whose only valid keys are the
// top-level sections) and descends into every declared section that is present. For each
// table the valid keys are: the section's own fields, the selected component's fields
// (component sections), and the names of its child sections. A child section that is an
// array of tables ([[data.sources]]) must be a non-empty array of tables; each entry is
// walked like a section of its own at "data.sources[i]".
#include "config/config_validator.hpp"

#include <algorithm>
#include <map>
#include <string>
#include <tuple>

#include "config/closest_names.hpp"
#include "config/component_options.hpp"
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
    const size_t host_field_count = fields.size();
    // Component sections: resolve the component first, so its keys count as valid.
    const bool is_component_section = section != nullptr && section->component_kind.has_value();
    bool component_keys_unchecked = false;
    std::string component_label;
    std::optional<ComponentSchema> chosen;
    if (is_component_section) {
      chosen = resolve_selected_component(path, table, *section);
      if (chosen) {
        component_label = std::string(" (") + component_kind_name(*section->component_kind) + " '" +
                          chosen->name + "')";
        for (const pb_config_field& field : chosen->fields) fields.push_back(&field);
      } else {
        component_keys_unchecked = true;  // nothing to check the other keys against
      }
    }
    const std::vector<std::string> child_sections = schema_.child_section_names(path);
    const std::vector<std::string> host_keys =
        section != nullptr ? host_key_names(*section) : std::vector<std::string>{};
    const std::vector<std::string> used =
        is_component_section
            ? used_component_names(table, host_keys, kinds_used_elsewhere(config_.table(), path))
            : std::vector<std::string>{};

    std::vector<std::string> valid_keys;
    for (const pb_config_field* field : fields) valid_keys.emplace_back(field->key);
    for (const std::string& child : child_sections) valid_keys.push_back(child);

    for (const auto& [key, node] : table) {
      const std::string key_path = join_key_path(path, key.str());
      const pb_config_field* field = find_field(fields, key.str());
      const bool is_host_key = std::find(host_keys.begin(), host_keys.end(), key.str()) != host_keys.end();
      if (is_child_section(child_sections, key.str())) {
        const HostSection* child = schema_.find(path.empty() ? std::string(key.str())
                                                             : path + "." + std::string(key.str()));
        if (child->array_of_tables) {
          validate_array_of_tables(key_path, node, *child);
        } else if (const toml::table* child_table = node.as_table()) {
          validate_table(key_path, *child_table, child);
        } else {
          add_issue(key_path, "wrong type", "a table [" + child->path + "] (" + child->summary + ")",
                    describe_value(node), "write the settings under a [" + child->path + "] header");
        }
        continue;
      }
      if (is_component_section && !is_host_key && node.is_table()) {
        const bool is_used = std::find(used.begin(), used.end(), key.str()) != used.end();
        validate_kind_options(path, std::string(key.str()), *node.as_table(), *section, is_used);
        continue;
      }
      if (field != nullptr) {
        check_field_value(*field, key_path, node);
        continue;
      }
      if (component_keys_unchecked) continue;
      report_unknown_key(path, key_path, std::string(key.str()), valid_keys, component_label,
                         is_component_section ? component_kind_name(*section->component_kind) : nullptr);
    }

    for (size_t i = 0; i < fields.size(); ++i) {
      const pb_config_field& field = *fields[i];
      if (!field.required || table.contains(field.key)) continue;
      // The chosen component's required keys may also sit in its per-kind table.
      if (i >= host_field_count && chosen && has_own_key(table, chosen->name, field.key)) continue;
      report_missing_required(path, field, component_label);
    }
    if (is_component_section) check_pattern(path, table, *section, chosen, host_keys);
  }

  // [[path]]: a non-empty array, every entry a table of the section's fields.
  void validate_array_of_tables(const std::string& key_path, const toml::node& node, const HostSection& section) {
    const toml::array* entries = node.as_array();
    const std::string header = "[[" + section.path + "]]";
    if (entries == nullptr || entries->empty()) {
      add_issue(key_path, entries == nullptr ? "wrong type" : "empty array",
                "an array of tables " + header + " (" + section.summary + "), at least one",
                entries == nullptr ? describe_value(node) : "an empty array",
                "write each entry under its own " + header + " header");
      return;
    }
    for (size_t i = 0; i < entries->size(); ++i) {
      const std::string item_path = array_item_path(key_path, i);
      if (const toml::table* entry = entries->get(i)->as_table()) {
        validate_table(item_path, *entry, &section);
      } else {
        add_issue(item_path, "wrong type", "a table (one " + header + " entry)", describe_value(*entries->get(i)),
                  "write each entry under its own " + header + " header");
      }
    }
  }

  // True when [path.<name>] is a table holding `key`.
  static bool has_own_key(const toml::table& table, const std::string& name, const char* key) {
    const toml::node* own = table.get(name);
    return own != nullptr && own->is_table() && own->as_table()->contains(key);
  }

  void report_missing_required(const std::string& path, const pb_config_field& field,
                               const std::string& component_label) {
    ConfigIssue issue;
    issue.where = config_.locate(path);
    issue.key_path = join_key_path(path, field.key);
    issue.problem = "missing required key";
    issue.expected = describe_expectation(field) + (field.doc ? std::string(": ") + field.doc : "");
    issue.found = "no '" + std::string(field.key) + "' in " + section_header(path) + component_label;
    issue.fix = "add " + std::string(field.key) + " = <" + schema_type_name(field.type) + "> under " +
                section_header(path);
    issues_.push_back(std::move(issue));
  }

  // The entries of a layer section's `pattern` name components too: each must exist, and each
  // gets its required keys from its own per-kind table (the `kind` component also from the
  // flat keys, checked above).
  void check_pattern(const std::string& path, const toml::table& table, const HostSection& section,
                     const std::optional<ComponentSchema>& chosen, const std::vector<std::string>& host_keys) {
    if (std::find(host_keys.begin(), host_keys.end(), kComponentPatternKey) == host_keys.end()) return;
    const toml::node* pattern = table.get(kComponentPatternKey);
    if (pattern == nullptr || !pattern->is_array() || !lookup_) return;
    const toml::array& items = *pattern->as_array();
    std::vector<std::string> checked;
    if (chosen) checked.push_back(chosen->name);
    for (size_t i = 0; i < items.size(); ++i) {
      if (!items.get(i)->is_string()) continue;  // reported by the field check
      const std::string name = items.get(i)->as_string()->get();
      if (std::find(checked.begin(), checked.end(), name) != checked.end()) continue;
      checked.push_back(name);
      const std::string item_path = array_item_path(join_key_path(path, kComponentPatternKey), i);
      const std::optional<ComponentSchema> component = find_component(path, section, name, item_path, *items.get(i));
      if (!component) continue;
      const std::string label = std::string(" (") + component_kind_name(*section.component_kind) + " '" + name +
                                "', from pattern)";
      for (const pb_config_field& field : component->fields) {
        if (!field.required || has_own_key(table, name, field.key)) continue;
        report_missing_required(join_key_path(path, name), field, label);
      }
    }
  }

  // A per-kind options table [path.name]: `name` must be a component of the section's kind,
  // and the table's keys are checked against that component's schema, whether it is used or
  // not (a typo in the options of an alternative is still a typo).
  void validate_kind_options(const std::string& path, const std::string& name, const toml::table& options,
                             const HostSection& section, bool is_used) {
    const std::string table_path = join_key_path(path, name);
    if (!lookup_) return;
    const std::optional<ComponentSchema> component = find_component(path, section, name, table_path, options);
    if (!component) return;
    const std::string label = std::string(" (") + component_kind_name(*section.component_kind) + " '" + name +
                              "'" + (is_used ? "" : ", not used: kept for a swap") + ")";
    std::vector<const pb_config_field*> fields;
    std::vector<std::string> valid_keys;
    for (const pb_config_field& field : component->fields) {
      fields.push_back(&field);
      valid_keys.emplace_back(field.key);
    }
    for (const auto& [key, node] : options) {
      const std::string key_path = join_key_path(table_path, key.str());
      if (const pb_config_field* field = find_field(fields, key.str())) {
        check_field_value(*field, key_path, node);
      } else {
        report_unknown_key(table_path, key_path, std::string(key.str()), valid_keys, label, nullptr);
      }
    }
  }

  // The component the section's `kind` selects, or nullopt (issue reported, or no lookup).
  std::optional<ComponentSchema> resolve_selected_component(const std::string& path, const toml::table& table,
                                                            const HostSection& section) {
    const toml::node* selector = table.get(kComponentSelectorKey);
    std::optional<toml::table> default_holder;
    if (selector == nullptr) {
      // No `kind`: the schema default (when there is one) is the component apply_defaults
      // will choose, so the flat keys are checked against it.
      for (const pb_config_field& field : section.fields) {
        if (std::string_view(field.key) == kComponentSelectorKey) default_holder = parse_default(field);
      }
      if (default_holder) selector = default_holder->get("value");
    }
    if (selector == nullptr || !selector->is_string() || !lookup_) return std::nullopt;
    return find_component(path, section, selector->as_string()->get(), join_key_path(path, kComponentSelectorKey),
                          *selector);
  }

  // The component of the section's kind called `name`, written at `named_at` (the selector,
  // a pattern entry or a per-kind table); reports an unknown name, a broken schema or a key
  // that shadows a host key of the section. Each name is looked up (and reported) once per
  // section.
  std::optional<ComponentSchema> find_component(const std::string& path, const HostSection& section,
                                                const std::string& name, const std::string& named_at,
                                                const toml::node& written) {
    const std::string cache_key = path + "\n" + name;
    if (auto it = components_.find(cache_key); it != components_.end()) return it->second;
    std::optional<ComponentSchema>& result = components_[cache_key];
    const pb_component_kind kind = *section.component_kind;
    ComponentLookupResult found = lookup_(kind, name);
    if (!found.schema) {
      const bool is_table = written.is_table();
      const std::vector<std::string> close = closest_names(name, found.available);
      ConfigIssue issue;
      issue.where = config_.locate(named_at);
      issue.key_path = named_at;
      issue.problem = std::string("unknown ") + component_kind_name(kind) + " component '" + name + "'" +
                      (is_table ? " (a per-kind options table is named after a component)" : "");
      issue.expected = found.available.empty()
                           ? std::string("the name of a loaded ") + component_kind_name(kind) + " (none found)"
                           : "one of the available " + std::string(component_kind_name(kind)) +
                                 " components: " + join_names(found.available);
      issue.found = is_table ? "[" + named_at + "]" : describe_value(written);
      issue.fix = (close.empty() ? std::string() : "did you mean " + quote_alternatives(close) + "? ") +
                  (is_table ? "rename or remove the table, " : "fix the name, ") +
                  "or add the plugin providing it to the plugin path (--plugin-path or run.plugin_paths)";
      issues_.push_back(std::move(issue));
      return std::nullopt;
    }
    const std::vector<std::string> problems = check_field_declarations(found.schema->fields);
    for (const std::string& problem : problems) {
      ConfigIssue issue;
      issue.where = config_.locate(named_at);
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
    result = found.schema;
    return result;
  }

  void check_field_value(const pb_config_field& field, const std::string& key_path, const toml::node& node) {
    std::optional<ValueProblem> problem = check_value(field, node);
    if (!problem) problem = check_path_component(key_path, node);
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

  // Values that name one folder of a path (run.name: runs/<name>/) must be one valid file
  // name, so the run directory can be made: no '/', not "." or "..", at most 255 bytes.
  static std::optional<ValueProblem> check_path_component(const std::string& key_path,
                                                          const toml::node& node) {
    if (key_path != "run.name" || !node.is_string()) return std::nullopt;
    const std::string& name = node.as_string()->get();
    if (!name.empty() && name.size() <= 255 && name.find('/') == std::string::npos && name != "." &&
        name != ".." && name.find('\0') == std::string::npos)
      return std::nullopt;
    ValueProblem problem;
    problem.problem = "not a usable folder name";
    problem.expected =
        "one folder name of 1 to 255 bytes, without '/' (the run directory is <output_dir>/<name>)";
    problem.found = name.size() > 60 ? "a name of " + std::to_string(name.size()) + " bytes"
                                     : "\"" + name + "\"";
    problem.fix = "choose a shorter name; put folders in run.output_dir";
    return problem;
  }

  // `component_kind_label` is set for the flat keys of a component section: the fix then also
  // says where the options of another component go.
  void report_unknown_key(const std::string& path, const std::string& key_path, const std::string& key,
                          const std::vector<std::string>& valid_keys, const std::string& component_label,
                          const char* component_kind_label) {
    const std::vector<std::string> close = closest_names(key, valid_keys);
    ConfigIssue issue;
    issue.where = config_.locate(key_path);
    issue.key_path = key_path;
    issue.problem = path.empty() ? "unknown section" : "unknown key";
    issue.expected = valid_keys.empty() ? "no keys in " + section_header(path) + component_label
                                        : (path.empty() ? "one of the sections: " : "one of the keys of " +
                                                                                        section_header(path) +
                                                                                        component_label + ": ") +
                                              join_names(valid_keys);
    issue.found = "'" + key + "'";
    issue.fix = close.empty() ? "remove it, or use one of the valid names"
                              : "did you mean " + quote_alternatives(close) + "? rename it, or remove it";
    if (component_kind_label != nullptr) {
      issue.fix += std::string("; options of another ") + component_kind_label + " go in its own table [" + path +
                   ".<name>]";
    }
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
  // find_component's answers, by "<section path>\n<name>".
  std::map<std::string, std::optional<ComponentSchema>> components_;
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

// [[path]]: each table entry of the array gets the section's defaults.
void fill_array_defaults(ResolvedConfig& config, const HostSection& section) {
  const size_t dot = section.path.rfind('.');
  toml::node* node = nullptr;
  if (dot == std::string::npos) {
    node = config.table().get(section.path);
  } else {
    HostSection parent;
    parent.path = section.path.substr(0, dot);
    toml::table* parent_table = find_or_create_section(config, parent, false);
    node = parent_table != nullptr ? parent_table->get(section.path.substr(dot + 1)) : nullptr;
  }
  toml::array* entries = node != nullptr ? node->as_array() : nullptr;
  for (size_t i = 0; entries != nullptr && i < entries->size(); ++i)
    if (toml::table* entry = entries->get(i)->as_table())
      fill_defaults(config, *entry, array_item_path(section.path, i), section.fields);
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
    if (section.array_of_tables) {
      fill_array_defaults(config, section);
      continue;
    }
    toml::table* table = find_or_create_section(config, section, section.always_present);
    if (table == nullptr) continue;
    fill_defaults(config, *table, section.path, section.fields);
    if (!section.component_kind) continue;
    const std::vector<std::string> host_keys = host_key_names(section);
    canonicalize_component_section(config, *table, section.path, host_keys,
                                   component_kind_name(*section.component_kind));
    if (!lookup) continue;
    const std::vector<std::string> also_used = kinds_used_elsewhere(config.table(), section.path);
    for (const std::string& name : used_component_names(*table, host_keys, also_used)) {
      const ComponentLookupResult found = lookup(*section.component_kind, name);
      toml::table* options = (*table)[name].as_table();
      if (found.schema && options != nullptr) {
        fill_defaults(config, *options, join_key_path(section.path, name), found.schema->fields);
      }
    }
  }
}

}  // namespace patchbay::config
