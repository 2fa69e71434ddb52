// Writing one TOML value as text; see toml_value_text.hpp.
#include "sweep/toml_value_text.hpp"

#include <cctype>
#include <charconv>
#include <cmath>
#include <sstream>

namespace patchbay::sweep {
namespace {

std::string quoted(const std::string& text) {
  std::string out = "\"";
  for (char c : text) {
    if (c == '"' || c == '\\') out += '\\';
    if (c == '\n') {
      out += "\\n";
      continue;
    }
    out += c;
  }
  return out + "\"";
}

bool bare_key(const std::string& key) {
  if (key.empty()) return false;
  for (char c : key)
    if (!(std::isalnum(static_cast<unsigned char>(c)) || c == '_' || c == '-')) return false;
  return true;
}

}  // namespace

std::string toml_value_text(const toml::node& node) {
  if (const toml::table* table = node.as_table()) {
    std::string text = "{";
    bool first = true;
    for (const auto& [key, value] : *table) {
      text += first ? " " : ", ";
      first = false;
      const std::string k(key.str());
      text += (bare_key(k) ? k : quoted(k)) + " = " + toml_value_text(value);
    }
    return text + (first ? "}" : " }");
  }
  if (const toml::array* array = node.as_array()) {
    std::string text = "[";
    for (size_t i = 0; i < array->size(); ++i)
      text += (i ? ", " : "") + toml_value_text(*array->get(i));
    return text + "]";
  }
  if (const auto* string = node.as_string()) return quoted(string->get());
  if (const auto* real = node.as_floating_point()) {
    const double v = real->get();
    if (std::isnan(v)) return "nan";
    if (std::isinf(v)) return v > 0 ? "inf" : "-inf";
    char buffer[64];
    const auto result = std::to_chars(buffer, buffer + sizeof buffer, v);
    std::string text(buffer, result.ptr);
    if (text.find_first_of(".e") == std::string::npos) text += ".0";  // stays a float
    return text;
  }
  std::ostringstream out;
  node.visit([&](const auto& v) { out << toml::toml_formatter{v}; });
  return out.str();
}

}  // namespace patchbay::sweep
