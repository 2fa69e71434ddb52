// ConfigBuilder: the pb_config_view a component's create() receives, built in a test from the
// component's own schema. Header-only, standard library only (no TOML library, no doctest).
//
//   #include <patchbay/testing/config_builder.hpp>
//   namespace pt = patchbay::testing;
//   pt::ConfigBuilder config(my::kMyAttention, {{"window", 32}, {"dropout", 0.1}});
//   pt::ConfigBuilder same(my::kMyAttention, "window = 32\ndropout = 0.1  # TOML-like lines");
//   config.set("causal", true).set("names", {"a", "b"});
//   descriptor.create(host, config.view(), &object);
//
// Every key of the schema is present in the view, in schema order: the value set here, or the
// schema's default (its TOML literal parsed here), exactly as the Patchbay host builds views.
// Values are checked as the host checks a config: the key must exist, the type must match
// (an integer is accepted for a float key), a number must lie in the declared range and a
// string among the declared choices. A mistake is a bug in the test, reported by throwing
// std::invalid_argument naming the component, the key, what was expected and what was found.
//
// Text form: one `key = value` per line; values are TOML literals (true/false, integers with
// optional `_` separators, floats, "basic" or 'literal' strings, arrays of strings on one line);
// blank lines and `#` comments are skipped. Tables, dates and multi-line values are not
// supported (component options never need them).
//
// Lifetime: view() is valid until the next change or the builder's destruction. The builder is
// copyable (a copy builds its own view). Not thread-safe.
#pragma once

#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <initializer_list>
#include <stdexcept>
#include <string>
#include <string_view>
#include <type_traits>
#include <utility>
#include <variant>
#include <vector>

#include "patchbay/component.h"

namespace patchbay::testing {

// One option value: a bool, an integer, a number, a string or a list of strings.
class ConfigValue {
 public:
  using Variant = std::variant<bool, int64_t, double, std::string, std::vector<std::string>>;

  ConfigValue(bool value) : value_(value) {}
  template <class Int,
            std::enable_if_t<std::is_integral_v<Int> && !std::is_same_v<Int, bool>, int> = 0>
  ConfigValue(Int value) : value_(static_cast<int64_t>(value)) {}
  ConfigValue(double value) : value_(value) {}
  ConfigValue(const char* value) : value_(std::string(value)) {}
  ConfigValue(std::string value) : value_(std::move(value)) {}
  ConfigValue(std::vector<std::string> items) : value_(std::move(items)) {}
  ConfigValue(std::initializer_list<const char*> items)
      : value_(std::vector<std::string>(items.begin(), items.end())) {}

  const Variant& get() const { return value_; }

 private:
  Variant value_;
};

namespace config_builder_detail {

inline std::string trim(std::string_view text) {
  const size_t begin = text.find_first_not_of(" \t\r");
  if (begin == std::string_view::npos) return "";
  const size_t end = text.find_last_not_of(" \t\r");
  return std::string(text.substr(begin, end - begin + 1));
}

// A "basic" (escapes \" \\ \n \t \r \uXXXX for ASCII) or 'literal' string starting at
// text[at]; advances `at` past the closing quote. False when malformed.
inline bool parse_string(std::string_view text, size_t& at, std::string& out) {
  if (at >= text.size() || (text[at] != '"' && text[at] != '\'')) return false;
  const char quote = text[at];
  out.clear();
  for (size_t i = at + 1; i < text.size(); ++i) {
    const char c = text[i];
    if (c == quote) {
      at = i + 1;
      return true;
    }
    if (c != '\\' || quote == '\'') {
      out += c;
      continue;
    }
    if (++i == text.size()) return false;
    switch (text[i]) {
      case '"':
        out += '"';
        break;
      case '\\':
        out += '\\';
        break;
      case 'n':
        out += '\n';
        break;
      case 't':
        out += '\t';
        break;
      case 'r':
        out += '\r';
        break;
      case 'u': {
        if (i + 4 >= text.size()) return false;
        const long code = std::strtol(std::string(text.substr(i + 1, 4)).c_str(), nullptr, 16);
        if (code <= 0 || code > 0x7f) return false;  // ASCII only: enough for test options
        out += static_cast<char>(code);
        i += 4;
        break;
      }
      default:
        return false;
    }
  }
  return false;
}

// The text up to a `#` that is outside quotes.
inline std::string strip_comment(std::string_view line) {
  char quote = 0;
  for (size_t i = 0; i < line.size(); ++i) {
    const char c = line[i];
    if (quote != 0) {
      if (c == '\\' && quote == '"') {
        ++i;
      } else if (c == quote) {
        quote = 0;
      }
    } else if (c == '"' || c == '\'') {
      quote = c;
    } else if (c == '#') {
      return std::string(line.substr(0, i));
    }
  }
  return std::string(line);
}

// One TOML literal of the kinds above; false when `text` is none of them.
inline bool parse_literal(const std::string& text, ConfigValue::Variant& out) {
  if (text == "true" || text == "false") {
    out = text == "true";
    return true;
  }
  if (text.empty()) return false;
  if (text.front() == '"' || text.front() == '\'') {
    size_t at = 0;
    std::string value;
    if (!parse_string(text, at, value) || !trim(std::string_view(text).substr(at)).empty())
      return false;
    out = std::move(value);
    return true;
  }
  if (text.front() == '[') {
    if (text.back() != ']') return false;
    std::vector<std::string> items;
    const std::string inner = text.substr(1, text.size() - 2);
    size_t at = 0;
    while (true) {
      while (at < inner.size() && (inner[at] == ' ' || inner[at] == '\t')) ++at;
      if (at == inner.size()) break;
      std::string item;
      if (!parse_string(inner, at, item)) return false;
      items.push_back(std::move(item));
      while (at < inner.size() && (inner[at] == ' ' || inner[at] == '\t')) ++at;
      if (at == inner.size()) break;
      if (inner[at] != ',') return false;
      ++at;
    }
    out = std::move(items);
    return true;
  }
  std::string number;
  for (char c : text) {
    if (c != '_') number += c;
  }
  const bool is_float = number.find_first_of(".eE") != std::string::npos || number == "inf" ||
                        number == "+inf" || number == "-inf" || number == "nan";
  char* end = nullptr;
  if (is_float) {
    const double value = std::strtod(number.c_str(), &end);
    if (end != number.c_str() + number.size()) return false;
    out = value;
  } else {
    const long long value = std::strtoll(number.c_str(), &end, 10);
    if (end != number.c_str() + number.size()) return false;
    out = static_cast<int64_t>(value);
  }
  return true;
}

// A range bound as written in a schema: 4096, 0.5, 1e-08 (%g, shortest common form).
inline std::string number(double value) {
  char text[32];
  std::snprintf(text, sizeof text, "%g", value);
  return text;
}

inline const char* type_name(pb_value_type type) {
  switch (type) {
    case PB_TYPE_BOOL:
      return "a boolean";
    case PB_TYPE_INT:
      return "an integer";
    case PB_TYPE_FLOAT:
      return "a number";
    case PB_TYPE_STRING:
      return "a string";
    case PB_TYPE_STRING_ARRAY:
      return "an array of strings";
  }
  return "an unknown type";
}

inline std::string describe(const ConfigValue::Variant& value) {
  struct Visitor {
    std::string operator()(bool b) const { return b ? "boolean true" : "boolean false"; }
    std::string operator()(int64_t i) const { return "integer " + std::to_string(i); }
    std::string operator()(double d) const { return "float " + std::to_string(d); }
    std::string operator()(const std::string& s) const { return "string \"" + s + "\""; }
    std::string operator()(const std::vector<std::string>& items) const {
      return "array of " + std::to_string(items.size()) + " strings";
    }
  };
  return std::visit(Visitor{}, value);
}

}  // namespace config_builder_detail

class ConfigBuilder {
 public:
  // Schema defaults; required keys stay unset until set (view() refuses until then).
  explicit ConfigBuilder(const pb_component_descriptor& component)
      : label_(std::string("component '") + (component.name != nullptr ? component.name : "?") +
               "'") {
    for (size_t i = 0; i < component.config_field_count; ++i) {
      const pb_config_field& field = *PB_ARRAY_AT(pb_config_field, component.config_fields, i);
      Entry entry;
      entry.field = field;
      if (field.default_value != nullptr) {
        ConfigValue::Variant value;
        if (!config_builder_detail::parse_literal(config_builder_detail::trim(field.default_value),
                                                  value)) {
          throw std::invalid_argument(label_ + ": the schema default of '" + field.key + "' (" +
                                      field.default_value +
                                      ") is not a TOML literal this builder reads; fix the schema");
        }
        entries_.push_back(std::move(entry));
        store(entries_.back(), std::move(value), "schema default");
      } else {
        entries_.push_back(std::move(entry));
      }
    }
  }
  // Defaults, then `settings` in order.
  ConfigBuilder(const pb_component_descriptor& component,
                std::initializer_list<std::pair<std::string_view, ConfigValue>> settings)
      : ConfigBuilder(component) {
    for (const auto& [key, value] : settings) set(key, value);
  }
  // Defaults, then the `key = value` lines of `text` (see the header comment).
  ConfigBuilder(const pb_component_descriptor& component, std::string_view text)
      : ConfigBuilder(component) {
    parse(text);
  }

  ConfigBuilder& set(std::string_view key, const ConfigValue& value) {
    store(entry(key), value.get(), "set");
    return *this;
  }
  ConfigBuilder& set_bool(std::string_view key, bool value) { return set(key, value); }
  ConfigBuilder& set_int(std::string_view key, int64_t value) { return set(key, value); }
  ConfigBuilder& set_float(std::string_view key, double value) { return set(key, value); }
  ConfigBuilder& set_string(std::string_view key, std::string value) {
    return set(key, std::move(value));
  }
  ConfigBuilder& set_strings(std::string_view key, std::vector<std::string> values) {
    return set(key, std::move(values));
  }

  // Applies `key = value` lines.
  ConfigBuilder& parse(std::string_view text) {
    size_t line_number = 0;
    while (!text.empty()) {
      const size_t newline = text.find('\n');
      const std::string line = config_builder_detail::trim(
          config_builder_detail::strip_comment(text.substr(0, newline)));
      text = newline == std::string_view::npos ? std::string_view() : text.substr(newline + 1);
      ++line_number;
      if (line.empty()) continue;
      const size_t equals = line.find('=');
      ConfigValue::Variant value;
      const std::string key =
          equals == std::string::npos ? "" : config_builder_detail::trim(line.substr(0, equals));
      if (key.empty() || !config_builder_detail::parse_literal(
                             config_builder_detail::trim(line.substr(equals + 1)), value)) {
        throw std::invalid_argument(
            label_ + ": line " + std::to_string(line_number) + " '" + line +
            "' is not `key = value` with a TOML literal value (bool, number, "
            "\"string\" or [\"array\", \"of strings\"])");
      }
      store(entry(key), std::move(value), "line " + std::to_string(line_number));
    }
    return *this;
  }

  bool has(std::string_view key) const {
    for (const Entry& e : entries_) {
      if (key == e.field.key) return true;
    }
    return false;
  }
  // Required keys not set yet.
  std::vector<std::string> missing() const {
    std::vector<std::string> keys;
    for (const Entry& e : entries_) {
      if (!e.is_set) keys.emplace_back(e.field.key);
    }
    return keys;
  }

  // Every schema key, in schema order. Throws std::invalid_argument while a required key is
  // unset. Valid until the next change or destruction.
  const pb_config_view* view() {
    const std::vector<std::string> unset = missing();
    if (!unset.empty()) {
      std::string keys;
      for (const std::string& k : unset) keys += (keys.empty() ? "" : ", ") + k;
      throw std::invalid_argument(label_ + ": required key(s) not set: " + keys);
    }
    values_.clear();
    item_pointers_.assign(entries_.size(), {});
    for (size_t i = 0; i < entries_.size(); ++i) {
      const Entry& e = entries_[i];
      for (const std::string& item : e.items) item_pointers_[i].push_back(item.c_str());
      pb_config_value v{};
      v.struct_size = sizeof(pb_config_value);
      v.key = e.field.key;
      v.type = e.field.type;
      v.bool_value = e.bool_value ? 1 : 0;
      v.int_value = e.int_value;
      v.float_value = e.float_value;
      v.string_value = e.string_value.c_str();
      v.string_items = item_pointers_[i].empty() ? nullptr : item_pointers_[i].data();
      v.string_count = item_pointers_[i].size();
      values_.push_back(v);
    }
    view_ = pb_config_view{sizeof(pb_config_view), values_.empty() ? nullptr : values_.data(),
                           values_.size()};
    return &view_;
  }

 private:
  struct Entry {
    pb_config_field field{};  // borrowed strings: the descriptor's schema is static
    bool is_set = false;
    bool bool_value = false;
    int64_t int_value = 0;
    double float_value = 0;
    std::string string_value;
    std::vector<std::string> items;
  };

  Entry& entry(std::string_view key) {
    for (Entry& e : entries_) {
      if (key == e.field.key) return e;
    }
    std::string keys;
    for (const Entry& e : entries_) keys += (keys.empty() ? "" : ", ") + std::string(e.field.key);
    throw std::invalid_argument(label_ + " has no config key '" + std::string(key) +
                                "'; valid keys: " + (keys.empty() ? std::string("(none)") : keys));
  }

  [[noreturn]] void refuse(const Entry& e, const std::string& what,
                           const ConfigValue::Variant& value, const std::string& origin) const {
    std::string expected = config_builder_detail::type_name(e.field.type);
    if (e.field.has_range) {
      expected += " in [" + config_builder_detail::number(e.field.min_value) + ", " +
                  config_builder_detail::number(e.field.max_value) + "]";
    }
    if (e.field.type == PB_TYPE_STRING && e.field.choices != nullptr) {
      expected += std::string(", one of ") + e.field.choices;
    }
    throw std::invalid_argument(label_ + ": key '" + e.field.key + "' (" + origin + "): " + what +
                                ": expected " + expected + ", found " +
                                config_builder_detail::describe(value));
  }

  void check_range(const Entry& e, double number, const ConfigValue::Variant& value,
                   const std::string& origin) const {
    if (std::isnan(number) ||
        (e.field.has_range && (number < e.field.min_value || number > e.field.max_value))) {
      refuse(e, "value out of range", value, origin);
    }
  }

  void store(Entry& e, const ConfigValue::Variant& value, const std::string& origin) {
    switch (e.field.type) {
      case PB_TYPE_BOOL:
        if (!std::holds_alternative<bool>(value)) refuse(e, "wrong type", value, origin);
        e.bool_value = std::get<bool>(value);
        break;
      case PB_TYPE_INT:
        if (!std::holds_alternative<int64_t>(value)) refuse(e, "wrong type", value, origin);
        check_range(e, static_cast<double>(std::get<int64_t>(value)), value, origin);
        e.int_value = std::get<int64_t>(value);
        e.float_value = static_cast<double>(e.int_value);  // as the host fills it
        break;
      case PB_TYPE_FLOAT: {
        double number = 0;
        if (std::holds_alternative<int64_t>(value)) {
          number = static_cast<double>(std::get<int64_t>(value));
        } else if (std::holds_alternative<double>(value)) {
          number = std::get<double>(value);
        } else {
          refuse(e, "wrong type", value, origin);
        }
        check_range(e, number, value, origin);
        e.float_value = number;
        break;
      }
      case PB_TYPE_STRING: {
        if (!std::holds_alternative<std::string>(value)) refuse(e, "wrong type", value, origin);
        const std::string& text = std::get<std::string>(value);
        if (e.field.choices != nullptr) {
          bool found = false;
          std::string_view rest(e.field.choices);
          while (!found) {
            const size_t bar = rest.find('|');
            found = rest.substr(0, bar) == text;
            if (bar == std::string_view::npos) break;
            rest.remove_prefix(bar + 1);
          }
          if (!found) refuse(e, "value not among the choices", value, origin);
        }
        e.string_value = text;
        break;
      }
      case PB_TYPE_STRING_ARRAY:
        if (!std::holds_alternative<std::vector<std::string>>(value))
          refuse(e, "wrong type", value, origin);
        e.items = std::get<std::vector<std::string>>(value);
        break;
      default:
        refuse(e, "the schema declares an unknown type", value, origin);
    }
    e.is_set = true;
  }

  std::string label_;
  std::vector<Entry> entries_;
  std::vector<pb_config_value> values_;
  std::vector<std::vector<const char*>> item_pointers_;
  pb_config_view view_{};
};

}  // namespace patchbay::testing
