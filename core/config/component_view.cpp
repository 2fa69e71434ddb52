// Building a pb_config_view from a toml table; see component_view.hpp.
#include "config/component_view.hpp"

#include <deque>
#include <optional>
#include <vector>

#include "common/error.hpp"
#include "config/component_options.hpp"
#include "config/config_document.hpp"
#include "config/config_error.hpp"
#include "config/closest_names.hpp"
#include "config/field_schema.hpp"
#include "config/type_names.hpp"

namespace patchbay::config {

// deques: growing them never moves the strings and arrays already pointed to.
struct ComponentConfigView::Storage {
  std::deque<std::string> strings;
  std::deque<std::vector<const char*>> string_arrays;
  std::vector<pb_config_value> values;
  pb_config_view view{};

  const char* keep(std::string text) { return strings.emplace_back(std::move(text)).c_str(); }
};

namespace {

[[noreturn]] void fail_value(const std::string& section_path, const pb_config_field& field, std::string problem,
                             std::string found) {
  ConfigIssue issue;
  issue.where = SourceLocation{"<resolved config>", 0};
  issue.key_path = join_key_path(section_path, field.key);
  issue.problem = std::move(problem);
  issue.expected = describe_expectation(field);
  issue.found = std::move(found);
  issue.fix = "validate the config before building components (patchbay config check)";
  throw ConfigError({std::move(issue)});
}

}  // namespace

ComponentConfigView::ComponentConfigView(const toml::table& section, std::span<const pb_config_field> fields,
                                         const std::string& section_path)
    : storage_(std::make_unique<Storage>()) {
  Storage& storage = *storage_;
  storage.values.reserve(fields.size());
  for (const pb_config_field& field : fields) {
    std::optional<toml::table> default_holder;
    const toml::node* node = section.get(field.key);
    if (node == nullptr) {
      default_holder = parse_default(field);
      if (!default_holder) fail_value(section_path, field, "missing required key", "no value and no default");
      node = default_holder->get("value");
    }
    if (const std::optional<ValueProblem> problem = check_value(field, *node)) {
      fail_value(section_path, field, problem->problem, problem->found);
    }
    pb_config_value value{};
    value.struct_size = sizeof(pb_config_value);
    value.key = storage.keep(field.key);
    value.type = field.type;
    switch (field.type) {
      case PB_TYPE_BOOL: value.bool_value = node->as_boolean()->get() ? 1 : 0; break;
      case PB_TYPE_INT:
        value.int_value = node->as_integer()->get();
        value.float_value = static_cast<double>(value.int_value);
        break;
      case PB_TYPE_FLOAT:
        value.float_value = node->is_integer() ? static_cast<double>(node->as_integer()->get())
                                               : node->as_floating_point()->get();
        break;
      case PB_TYPE_STRING: value.string_value = storage.keep(node->as_string()->get()); break;
      case PB_TYPE_STRING_ARRAY: {
        std::vector<const char*>& items = storage.string_arrays.emplace_back();
        for (const toml::node& item : *node->as_array()) items.push_back(storage.keep(item.as_string()->get()));
        value.string_items = items.empty() ? nullptr : items.data();
        value.string_count = items.size();
        break;
      }
    }
    storage.values.push_back(value);
  }
  storage.view.struct_size = sizeof(pb_config_view);
  storage.view.values = storage.values.empty() ? nullptr : storage.values.data();
  storage.view.count = storage.values.size();
}

ComponentConfigView::~ComponentConfigView() = default;
ComponentConfigView::ComponentConfigView(ComponentConfigView&&) noexcept = default;
ComponentConfigView& ComponentConfigView::operator=(ComponentConfigView&&) noexcept = default;

const pb_config_view* ComponentConfigView::view() const { return &storage_->view; }

const pb_config_value* ComponentConfigView::find(std::string_view key) const {
  for (const pb_config_value& value : storage_->values) {
    if (key == value.key) return &value;
  }
  return nullptr;
}

SelectedComponent select_component(const ResolvedConfig& config, const SchemaRegistry& schema,
                                   const ComponentSchemaLookup& lookup, const std::string& section_path) {
  const HostSection* section = schema.find(section_path);
  if (section == nullptr || !section->component_kind || !lookup) {
    throw Error(ErrorKind::kInternal, "select_component: [" + section_path +
                                          "] is not a component section, or no component lookup was given");
  }
  const char* kind_name = component_kind_name(*section->component_kind);
  const std::string selector_path = join_key_path(section_path, kComponentSelectorKey);
  const toml::node* table = config.find(section_path);
  const toml::node* selector = config.find(selector_path);
  if (table == nullptr || !table->is_table() || selector == nullptr || !selector->is_string()) {
    ConfigIssue issue;
    issue.where = config.locate(selector_path);
    issue.key_path = selector_path;
    issue.problem = std::string("no ") + kind_name + " chosen";
    issue.expected = "a [" + section_path + "] table with kind = \"<" + kind_name + " name>\"";
    issue.found = selector == nullptr ? "nothing" : describe_value(*selector);
    issue.fix = "add [" + section_path + "] with a kind key to the config, or --set " + selector_path + "=<name>";
    throw ConfigError({std::move(issue)});
  }
  const std::string name = selector->as_string()->get();
  const ComponentLookupResult found = lookup(*section->component_kind, name);
  if (!found.schema) {
    ConfigIssue issue;
    issue.where = config.locate(selector_path);
    issue.key_path = selector_path;
    issue.problem = std::string("unknown ") + kind_name + " component '" + name + "'";
    issue.expected = "one of: " + join_names(found.available);
    issue.found = describe_value(*selector);
    issue.fix = "validate the config first (patchbay config check)";
    throw ConfigError({std::move(issue)});
  }
  const std::vector<std::string> host_keys = host_key_names(*section);
  const toml::table options = component_options(*table->as_table(), name, host_keys);
  return SelectedComponent{name, ComponentConfigView(options, found.schema->fields, join_key_path(section_path, name))};
}

}  // namespace patchbay::config
