// ComponentConfig: typed setters over the config library's value checks and view builder
// (see component_config.hpp).
#include "runtime/component_config.hpp"

#include <toml++/toml.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <optional>

#include "common/error.hpp"
#include "config/component_view.hpp"
#include "config/field_schema.hpp"
#include "config/type_names.hpp"
#include "runtime/registry.hpp"  // kind_name

namespace patchbay::runtime {

struct ComponentConfig::State {
  std::string component;                // "tokenizer 'char'" for messages
  std::vector<pb_config_field> fields;  // copied (ABI stride); strings borrowed
  toml::table values;                   // the keys set through the setters
  std::optional<config::ComponentConfigView> built;
};

namespace {

std::string type_word(pb_value_type type) {
  switch (type) {
    case PB_TYPE_BOOL:
      return "bool";
    case PB_TYPE_INT:
      return "int";
    case PB_TYPE_FLOAT:
      return "float";
    case PB_TYPE_STRING:
      return "string";
    case PB_TYPE_STRING_ARRAY:
      return "array of strings";
  }
  return "unknown type";
}

}  // namespace

ComponentConfig::ComponentConfig(const pb_component_descriptor& component)
    : state_(std::make_unique<State>()) {
  State& s = *state_;
  s.component =
      kind_name(component.kind) + " '" + (component.name != nullptr ? component.name : "?") + "'";
  for (size_t i = 0; i < component.config_field_count; ++i) {
    const pb_config_field* declared = PB_ARRAY_AT(pb_config_field, component.config_fields, i);
    pb_config_field field{};
    std::memcpy(&field, declared, std::min<size_t>(declared->struct_size, sizeof field));
    field.struct_size = sizeof field;
    s.fields.push_back(field);
  }
  const std::vector<std::string> problems = config::check_field_declarations(s.fields);
  if (!problems.empty()) {
    std::string joined;
    for (const std::string& p : problems) joined += (joined.empty() ? "" : "; ") + p;
    throw Error(ErrorKind::kPluginRefused, s.component + ": broken config schema: " + joined +
                                               "; fix the component's config schema");
  }
}

ComponentConfig::~ComponentConfig() = default;
ComponentConfig::ComponentConfig(ComponentConfig&&) noexcept = default;
ComponentConfig& ComponentConfig::operator=(ComponentConfig&&) noexcept = default;

template <class Store>
void ComponentConfig::set(std::string_view key, pb_value_type given, const Store& store) {
  State& s = *state_;
  const pb_config_field* field = nullptr;
  for (const pb_config_field& f : s.fields) {
    if (key == f.key) field = &f;
  }
  if (field == nullptr) {
    std::string known;
    for (const pb_config_field& f : s.fields)
      known += (known.empty() ? "" : ", ") + std::string(f.key);
    throw Error(ErrorKind::kInvalidArgument,
                s.component + " has no config key '" + std::string(key) +
                    "'; valid keys: " + (known.empty() ? std::string("(none)") : known));
  }
  const bool int_as_float = given == PB_TYPE_INT && field->type == PB_TYPE_FLOAT;
  if (field->type != given && !int_as_float) {
    throw Error(ErrorKind::kInvalidArgument, s.component + ": key '" + field->key + "' expects " +
                                                 type_word(field->type) + ", got " +
                                                 type_word(given));
  }
  toml::table candidate;
  store(candidate);
  const toml::node& value = *candidate.get("value");
  if (const std::optional<config::ValueProblem> problem = config::check_value(*field, value)) {
    throw Error(ErrorKind::kInvalidArgument,
                s.component + ": key '" + field->key + "' = " + config::format_toml_value(value) +
                    ": " + problem->problem + "; expected " + problem->expected);
  }
  s.values.insert_or_assign(field->key, *candidate.get("value"));
  s.built.reset();
}

void ComponentConfig::set_bool(std::string_view key, bool value) {
  set(key, PB_TYPE_BOOL, [&](toml::table& t) { t.insert("value", value); });
}

void ComponentConfig::set_int(std::string_view key, int64_t value) {
  set(key, PB_TYPE_INT, [&](toml::table& t) { t.insert("value", value); });
}

void ComponentConfig::set_float(std::string_view key, double value) {
  if (!std::isfinite(value)) {
    throw Error(ErrorKind::kInvalidArgument, state_->component + ": key '" + std::string(key) +
                                                 "' must be a finite number, got " +
                                                 std::to_string(value));
  }
  set(key, PB_TYPE_FLOAT, [&](toml::table& t) { t.insert("value", value); });
}

void ComponentConfig::set_string(std::string_view key, std::string value) {
  set(key, PB_TYPE_STRING, [&](toml::table& t) { t.insert("value", value); });
}

void ComponentConfig::set_strings(std::string_view key, std::vector<std::string> values) {
  set(key, PB_TYPE_STRING_ARRAY, [&](toml::table& t) {
    toml::array items;
    for (std::string& v : values) items.push_back(std::move(v));
    t.insert("value", std::move(items));
  });
}

void ComponentConfig::check_complete() const {
  std::string missing;
  for (const pb_config_field& f : state_->fields) {
    if (f.required && !state_->values.contains(f.key))
      missing += (missing.empty() ? "" : ", ") + std::string(f.key);
  }
  if (!missing.empty()) {
    throw Error(ErrorKind::kInvalidArgument,
                state_->component + ": required config key(s) not set: " + missing);
  }
}

std::vector<std::string> ComponentConfig::keys() const {
  std::vector<std::string> out;
  for (const pb_config_field& f : state_->fields) out.emplace_back(f.key);
  return out;
}

const pb_config_view& ComponentConfig::view() {
  check_complete();
  if (!state_->built) state_->built.emplace(state_->values, state_->fields, state_->component);
  return *state_->built->view();
}

}  // namespace patchbay::runtime
