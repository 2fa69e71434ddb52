// ComponentConfig: schema defaults, checked setters and the pb_config_view handed to
// create() (see component_config.hpp).
#include "runtime/component_config.hpp"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <optional>
#include <sstream>

#include "common/error.hpp"
#include "runtime/registry.hpp"  // kind_name

namespace patchbay::runtime {
namespace {

const char* type_name(pb_value_type type) {
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

std::string trim(std::string_view s) {
  const size_t b = s.find_first_not_of(" \t");
  if (b == std::string_view::npos) return {};
  const size_t e = s.find_last_not_of(" \t");
  return std::string(s.substr(b, e - b + 1));
}

// A TOML basic string literal "..." with the common escapes; nullopt when malformed.
// `rest` receives what follows the closing quote.
std::optional<std::string> parse_string_literal(std::string_view s, std::string_view* rest) {
  if (s.empty() || s.front() != '"') return std::nullopt;
  std::string out;
  for (size_t i = 1; i < s.size(); ++i) {
    const char c = s[i];
    if (c == '"') {
      if (rest != nullptr) *rest = s.substr(i + 1);
      return out;
    }
    if (c != '\\') {
      out.push_back(c);
      continue;
    }
    if (++i == s.size()) return std::nullopt;
    switch (s[i]) {
      case 'n':
        out.push_back('\n');
        break;
      case 't':
        out.push_back('\t');
        break;
      case '"':
        out.push_back('"');
        break;
      case '\\':
        out.push_back('\\');
        break;
      default:
        return std::nullopt;
    }
  }
  return std::nullopt;
}

std::string_view skip_space(std::string_view s) {
  const size_t b = s.find_first_not_of(" \t");
  return b == std::string_view::npos ? std::string_view() : s.substr(b);
}

// ["a", "b"] or []; nullopt when malformed.
std::optional<std::vector<std::string>> parse_string_array(const std::string& text) {
  const std::string t = trim(text);
  if (t.size() < 2 || t.front() != '[' || t.back() != ']') return std::nullopt;
  std::vector<std::string> items;
  std::string_view rest = skip_space(std::string_view(t).substr(1, t.size() - 2));
  while (!rest.empty()) {
    std::string_view after;
    std::optional<std::string> item = parse_string_literal(rest, &after);
    if (!item) return std::nullopt;
    items.push_back(std::move(*item));
    rest = skip_space(after);
    if (rest.empty()) break;
    if (rest.front() != ',') return std::nullopt;
    rest = skip_space(rest.substr(1));
  }
  return items;
}

}  // namespace

ComponentConfig::ComponentConfig(const pb_component_descriptor& component) {
  component_ =
      kind_name(component.kind) + " '" + (component.name != nullptr ? component.name : "?") + "'";
  for (size_t i = 0; i < component.config_field_count; ++i) {
    const pb_config_field& f = *PB_ARRAY_AT(pb_config_field, component.config_fields, i);
    Entry e;
    e.key = f.key != nullptr ? f.key : "";
    for (const Entry& earlier : entries_) {
      if (earlier.key == e.key) {
        throw Error(ErrorKind::kPluginRefused,
                    component_ + ": config key '" + e.key + "' is declared twice in the schema");
      }
    }
    e.type = f.type;
    e.required = f.required != 0;
    e.has_range = f.has_range != 0;
    e.min_value = f.min_value;
    e.max_value = f.max_value;
    if (f.choices != nullptr) {
      std::stringstream choices(f.choices);
      for (std::string c; std::getline(choices, c, '|');) e.choices.push_back(c);
    }
    entries_.push_back(std::move(e));
    if (!entries_.back().required) set_default(entries_.back(), f.default_value);
  }
}

void ComponentConfig::set_default(Entry& e, const char* literal) {
  auto bad = [&](const std::string& why) {
    throw Error(ErrorKind::kPluginRefused, component_ + ": the default of key '" + e.key + "' (" +
                                               (literal != nullptr ? literal : "NULL") + ") " +
                                               why + "; fix the component's config schema");
  };
  if (literal == nullptr) bad("is missing although the key is not required");
  const std::string text = trim(literal);
  switch (e.type) {
    case PB_TYPE_BOOL:
      if (text != "true" && text != "false") bad("is not a TOML bool (true or false)");
      set_bool(e.key, text == "true");
      break;
    case PB_TYPE_INT: {
      int64_t v = 0;
      const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), v);
      if (ec != std::errc() || end != text.data() + text.size()) bad("is not a TOML integer");
      set_int(e.key, v);
      break;
    }
    case PB_TYPE_FLOAT: {
      double v = 0;
      const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), v);
      if (ec != std::errc() || end != text.data() + text.size()) bad("is not a TOML float");
      set_float(e.key, v);
      break;
    }
    case PB_TYPE_STRING: {
      std::string_view rest;
      auto v = parse_string_literal(text, &rest);
      if (!v || !trim(rest).empty()) bad("is not a TOML string literal (\"...\")");
      set_string(e.key, *v);
      break;
    }
    case PB_TYPE_STRING_ARRAY: {
      auto v = parse_string_array(text);
      if (!v) bad("is not a TOML array of strings ([\"a\", \"b\"])");
      set_strings(e.key, *v);
      break;
    }
    default:
      bad("has an unknown type " + std::to_string(static_cast<int>(e.type)));
  }
  e.set = true;
}

ComponentConfig::Entry& ComponentConfig::entry(std::string_view key, pb_value_type wanted) {
  for (Entry& e : entries_) {
    if (e.key != key) continue;
    const bool int_as_float = wanted == PB_TYPE_INT && e.type == PB_TYPE_FLOAT;
    if (e.type != wanted && !int_as_float) {
      throw Error(ErrorKind::kInvalidArgument, component_ + ": key '" + e.key + "' expects " +
                                                   type_name(e.type) + ", got " +
                                                   type_name(wanted));
    }
    return e;
  }
  std::string known;
  for (const Entry& e : entries_) known += (known.empty() ? "" : ", ") + e.key;
  throw Error(ErrorKind::kInvalidArgument,
              component_ + " has no config key '" + std::string(key) +
                  "'; valid keys: " + (known.empty() ? std::string("(none)") : known));
}

void ComponentConfig::set_bool(std::string_view key, bool value) {
  Entry& e = entry(key, PB_TYPE_BOOL);
  e.bool_value = value;
  e.set = true;
}

void ComponentConfig::set_int(std::string_view key, int64_t value) {
  Entry& e = entry(key, PB_TYPE_INT);
  if (e.type == PB_TYPE_FLOAT) {
    set_float(key, static_cast<double>(value));
    return;
  }
  const auto v = static_cast<double>(value);
  if (e.has_range && (v < e.min_value || v > e.max_value)) {
    std::ostringstream m;
    m << component_ << ": key '" << e.key << "' = " << value << " is outside the allowed range ["
      << e.min_value << ", " << e.max_value << "]";
    throw Error(ErrorKind::kInvalidArgument, m.str());
  }
  e.int_value = value;
  e.set = true;
}

void ComponentConfig::set_float(std::string_view key, double value) {
  Entry& e = entry(key, PB_TYPE_FLOAT);
  if (!std::isfinite(value) || (e.has_range && (value < e.min_value || value > e.max_value))) {
    std::ostringstream m;
    m << component_ << ": key '" << e.key << "' = " << value << " is outside the allowed range ["
      << e.min_value << ", " << e.max_value << "]";
    throw Error(ErrorKind::kInvalidArgument, m.str());
  }
  e.float_value = value;
  e.set = true;
}

void ComponentConfig::set_string(std::string_view key, std::string value) {
  Entry& e = entry(key, PB_TYPE_STRING);
  if (!e.choices.empty() &&
      std::find(e.choices.begin(), e.choices.end(), value) == e.choices.end()) {
    std::string allowed;
    for (const std::string& c : e.choices) allowed += (allowed.empty() ? "" : ", ") + c;
    throw Error(ErrorKind::kInvalidArgument,
                component_ + ": key '" + e.key + "' = \"" + value + "\" is not one of: " + allowed);
  }
  e.string_value = std::move(value);
  e.set = true;
}

void ComponentConfig::set_strings(std::string_view key, std::vector<std::string> values) {
  Entry& e = entry(key, PB_TYPE_STRING_ARRAY);
  e.strings = std::move(values);
  e.set = true;
}

void ComponentConfig::check_complete() const {
  std::string missing;
  for (const Entry& e : entries_) {
    if (!e.set) missing += (missing.empty() ? "" : ", ") + e.key;
  }
  if (!missing.empty()) {
    throw Error(ErrorKind::kInvalidArgument,
                component_ + ": required config key(s) not set: " + missing);
  }
}

std::vector<std::string> ComponentConfig::keys() const {
  std::vector<std::string> out;
  for (const Entry& e : entries_) out.push_back(e.key);
  return out;
}

const pb_config_view& ComponentConfig::view() {
  check_complete();
  values_.clear();
  item_pointers_.clear();
  item_pointers_.reserve(entries_.size());  // pointers into it stay valid below
  for (const Entry& e : entries_) {
    pb_config_value v{};
    v.struct_size = sizeof(pb_config_value);
    v.key = e.key.c_str();
    v.type = e.type;
    v.bool_value = e.bool_value ? 1 : 0;
    v.int_value = e.int_value;
    v.float_value = e.float_value;
    v.string_value = e.string_value.c_str();
    std::vector<const char*>& items = item_pointers_.emplace_back();
    for (const std::string& s : e.strings) items.push_back(s.c_str());
    v.string_items = items.empty() ? nullptr : items.data();
    v.string_count = items.size();
    values_.push_back(v);
  }
  view_.struct_size = sizeof(pb_config_view);
  view_.values = values_.empty() ? nullptr : values_.data();
  view_.count = values_.size();
  return view_;
}

}  // namespace patchbay::runtime
