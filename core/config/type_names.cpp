// Type words for messages; see type_names.hpp.
#include "config/type_names.hpp"

#include <charconv>
#include <cmath>
#include <sstream>

#include "config/config_document.hpp"

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

std::string format_toml_value(const toml::node& node) {
  if (const toml::value<double>* number = node.as_floating_point()) {
    const double value = number->get();
    if (std::isnan(value)) return "nan";
    if (std::isinf(value)) return value > 0 ? "inf" : "-inf";
    char text[64];
    const auto [end, error] = std::to_chars(text, text + sizeof text, value);  // shortest round trip
    std::string result(text, error == std::errc() ? end : text);
    if (result.find_first_of(".eEn") == std::string::npos) result += ".0";  // keep it a float
    return result;
  }
  if (const toml::array* array = node.as_array()) {
    std::string result = "[";
    for (size_t i = 0; i < array->size(); ++i) result += (i ? ", " : "") + format_toml_value(*array->get(i));
    return result + "]";
  }
  if (const toml::table* table = node.as_table()) {
    std::string result = "{";
    bool first = true;
    for (const auto& [key, child] : *table) {
      result += (first ? " " : ", ") + format_toml_key(key.str()) + " = " + format_toml_value(child);
      first = false;
    }
    return result + (first ? "}" : " }");
  }
  // Strings, integers, booleans, dates: TOML++'s formatter, with basic (double-quoted)
  // strings: what users write and what messages quote.
  std::ostringstream rendered;
  node.visit([&](const auto& value) {
    rendered << toml::toml_formatter(value, toml::format_flags::allow_unicode_strings);
  });
  return rendered.str();
}

std::string describe_value(const toml::node& node) {
  if (node.is_table()) return "table {...}";
  std::string text = format_toml_value(node);
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
