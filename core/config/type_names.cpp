// Type words for messages; see type_names.hpp.
#include "config/type_names.hpp"

#include <sstream>

namespace patchbay::config {

std::string toml_type_name(const toml::node& node) {
  switch (node.type()) {
    case toml::node_type::table: return "table";
    case toml::node_type::array: return "array";
    case toml::node_type::string: return "string";
    case toml::node_type::integer: return "integer";
    case toml::node_type::floating_point: return "float";
    case toml::node_type::boolean: return "boolean";
    case toml::node_type::date: return "date";
    case toml::node_type::time: return "time";
    case toml::node_type::date_time: return "date-time";
    case toml::node_type::none: break;
  }
  return "nothing";
}

std::string describe_value(const toml::node& node) {
  if (node.is_table()) return "table {...}";
  std::ostringstream rendered;
  node.visit([&](const auto& value) { rendered << toml::toml_formatter(value); });
  std::string text = rendered.str();
  constexpr size_t kMaxChars = 60;
  if (text.size() > kMaxChars) text = text.substr(0, kMaxChars) + "...";
  return toml_type_name(node) + " " + text;
}

std::string schema_type_name(pb_value_type type) {
  switch (type) {
    case PB_TYPE_BOOL: return "boolean";
    case PB_TYPE_INT: return "integer";
    case PB_TYPE_FLOAT: return "float";
    case PB_TYPE_STRING: return "string";
    case PB_TYPE_STRING_ARRAY: return "array of strings";
  }
  return "unknown type " + std::to_string(static_cast<int>(type));
}

}  // namespace patchbay::config
