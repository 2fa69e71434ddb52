// Checking values against pb_config_field declarations; see field_schema.hpp.
#include "config/field_schema.hpp"

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <set>

#include "common/error.hpp"
#include "config/closest_names.hpp"
#include "config/type_names.hpp"

namespace patchbay::config {
namespace {

// Longest string value any field takes: a config is a small text file, and a 10 MB value (a
// pasted file, a runaway generator) would only fail later, somewhere less clear.
constexpr std::size_t kMaxStringValueBytes = std::size_t{16} << 20;

std::string format_number(pb_value_type type, double number) {
  char text[64];
  if (type == PB_TYPE_INT) {
    std::snprintf(text, sizeof text, "%.0f", number);
  } else {
    std::snprintf(text, sizeof text, "%.17g", number);
    // Prefer the short form when it reads back exactly.
    char shorter[64];
    std::snprintf(shorter, sizeof shorter, "%g", number);
    if (std::strtod(shorter, nullptr) == number) return shorter;
  }
  return text;
}

std::string range_text(const pb_config_field& field) {
  // Appended piecewise: GCC 12 warns (-Wrestrict, a false positive) on "[" + std::string.
  std::string text = "[";
  text += format_number(field.type, field.min_value);
  text += ", ";
  text += format_number(field.type, field.max_value);
  text += "]";
  return text;
}

std::optional<ValueProblem> wrong_type(const pb_config_field& field, const toml::node& value) {
  ValueProblem problem;
  problem.problem = "wrong type";
  problem.expected = describe_expectation(field);
  problem.found = describe_value(value);
  problem.fix = "write " + schema_type_name(field.type) + " value";
  if (field.type == PB_TYPE_STRING && !value.is_string()) {
    problem.fix = "quote the value: \"...\"";
  } else if (field.type == PB_TYPE_INT && value.is_floating_point()) {
    problem.fix = "write a whole number without a decimal point";
  } else if (field.type == PB_TYPE_BOOL) {
    problem.fix = "write true or false (no quotes)";
  } else if (field.type == PB_TYPE_STRING_ARRAY) {
    problem.fix = "write an array of quoted strings, e.g. [\"a\", \"b\"]";
  } else if (value.is_string()) {
    problem.fix = "remove the quotes around the number";
  }
  return problem;
}

std::optional<ValueProblem> check_number(const pb_config_field& field, double number, const toml::node& value) {
  if (std::isnan(number) || (field.has_range && (number < field.min_value || number > field.max_value))) {
    ValueProblem problem;
    problem.problem = "value out of range";
    problem.expected = describe_expectation(field);
    problem.found = describe_value(value);
    problem.fix = field.has_range ? "choose a value in " + range_text(field) : "write a number";
    return problem;
  }
  return std::nullopt;
}

}  // namespace

std::vector<std::string> split_choices(const pb_config_field& field) {
  std::vector<std::string> choices;
  if (field.type != PB_TYPE_STRING || field.choices == nullptr) return choices;
  std::string_view rest(field.choices);
  while (true) {
    const size_t bar = rest.find('|');
    choices.emplace_back(rest.substr(0, bar));
    if (bar == std::string_view::npos) break;
    rest.remove_prefix(bar + 1);
  }
  return choices;
}

std::string describe_expectation(const pb_config_field& field) {
  std::string text;
  switch (field.type) {
    case PB_TYPE_BOOL: text = "a boolean (true or false)"; break;
    case PB_TYPE_INT: text = "an integer"; break;
    case PB_TYPE_FLOAT: text = "a number"; break;
    case PB_TYPE_STRING: text = "a string"; break;
    case PB_TYPE_STRING_ARRAY: text = "an array of strings"; break;
  }
  if (text.empty()) text = schema_type_name(field.type);
  if (field.has_range && (field.type == PB_TYPE_INT || field.type == PB_TYPE_FLOAT)) {
    text += " in " + range_text(field);
  }
  const std::vector<std::string> choices = split_choices(field);
  if (!choices.empty()) text += ", one of " + quote_alternatives(choices);
  return text;
}

std::optional<ValueProblem> check_value(const pb_config_field& field, const toml::node& value) {
  switch (field.type) {
    case PB_TYPE_BOOL:
      if (!value.is_boolean()) return wrong_type(field, value);
      return std::nullopt;
    case PB_TYPE_INT:
      if (!value.is_integer()) return wrong_type(field, value);
      return check_number(field, static_cast<double>(value.as_integer()->get()), value);
    case PB_TYPE_FLOAT:
      if (value.is_integer()) return check_number(field, static_cast<double>(value.as_integer()->get()), value);
      if (!value.is_floating_point()) return wrong_type(field, value);
      return check_number(field, value.as_floating_point()->get(), value);
    case PB_TYPE_STRING: {
      if (!value.is_string()) return wrong_type(field, value);
      if (value.as_string()->get().size() > kMaxStringValueBytes) {
        ValueProblem problem;
        problem.problem = "value too long";
        // Appended piecewise (GCC 12's -Wrestrict misfires on "literal" + std::string here).
        problem.expected = describe_expectation(field);
        problem.expected += " of at most ";
        problem.expected += std::to_string(kMaxStringValueBytes >> 20);
        problem.expected += " MiB";
        problem.found = "a string of ";
        problem.found += std::to_string(value.as_string()->get().size());
        problem.found += " bytes";
        problem.fix = "shorten it (long texts belong in files the config names)";
        return problem;
      }
      const std::vector<std::string> choices = split_choices(field);
      const std::string& text = value.as_string()->get();
      if (choices.empty()) return std::nullopt;
      for (const std::string& choice : choices) {
        if (choice == text) return std::nullopt;
      }
      ValueProblem problem;
      problem.problem = "value not among the choices";
      problem.expected = "one of " + quote_alternatives(choices);
      problem.found = describe_value(value);
      const std::vector<std::string> close = closest_names(text, choices);
      problem.fix = close.empty() ? "choose one of the listed values"
                                  : "did you mean " + quote_alternatives(close) + "?";
      return problem;
    }
    case PB_TYPE_STRING_ARRAY: {
      const toml::array* array = value.as_array();
      if (array == nullptr) return wrong_type(field, value);
      for (size_t i = 0; i < array->size(); ++i) {
        const toml::node& item = *array->get(i);
        if (item.is_string()) continue;
        ValueProblem problem;
        problem.problem = "wrong type of array item";
        problem.expected = "a string (every item of " + describe_expectation(field) + ")";
        problem.found = describe_value(item);
        problem.fix = "quote the item: \"...\"";
        problem.item_suffix = "[";  // piecewise: see above (-Wrestrict)
        problem.item_suffix += std::to_string(i);
        problem.item_suffix += "]";
        return problem;
      }
      return std::nullopt;
    }
  }
  ValueProblem problem;
  problem.problem = "field declares an unknown type";
  problem.expected = "a pb_value_type the host knows";
  problem.found = "type " + std::to_string(static_cast<int>(field.type));
  problem.fix = "rebuild the plugin against this SDK";
  return problem;
}

std::optional<toml::table> parse_default(const pb_config_field& field) {
  if (field.default_value == nullptr) return std::nullopt;
  try {
    toml::table parsed = toml::parse(std::string("value = ") + field.default_value);
    if (parsed.size() == 1 && parsed.contains("value")) return parsed;
  } catch (const toml::parse_error&) {
    // Reported below.
  }
  throw Error(ErrorKind::kInternal, std::string("config field '") + (field.key ? field.key : "?") +
                                        "': default_value '" + field.default_value +
                                        "' is not one TOML value literal (strings need quotes)");
}

std::vector<std::string> check_field_declarations(std::span<const pb_config_field> fields) {
  std::vector<std::string> problems;
  std::set<std::string> seen;
  for (size_t i = 0; i < fields.size(); ++i) {
    const pb_config_field& field = fields[i];
    if (field.struct_size < sizeof(pb_config_field)) {
      problems.push_back("field " + std::to_string(i) + ": struct_size " + std::to_string(field.struct_size) +
                         " is smaller than pb_config_field (" + std::to_string(sizeof(pb_config_field)) + ")");
      continue;
    }
    if (field.key == nullptr || field.key[0] == '\0') {
      problems.push_back("field " + std::to_string(i) + " has no key");
      continue;
    }
    const std::string key = field.key;
    if (!seen.insert(key).second) problems.push_back("key '" + key + "' is declared twice");
    if (field.type < PB_TYPE_BOOL || field.type > PB_TYPE_STRING_ARRAY) {
      problems.push_back("key '" + key + "' has unknown type " + std::to_string(static_cast<int>(field.type)));
      continue;
    }
    if (field.has_range && field.min_value > field.max_value) {
      problems.push_back("key '" + key + "': min_value > max_value");
    }
    if (field.required && field.default_value != nullptr) {
      problems.push_back("key '" + key + "' is required but has a default");
    }
    if (!field.required && field.default_value == nullptr) {
      problems.push_back("key '" + key + "' is optional but has no default_value");
    }
    if (field.default_value == nullptr) continue;
    try {
      const std::optional<toml::table> parsed = parse_default(field);
      if (const std::optional<ValueProblem> problem = check_value(field, *parsed->get("value"))) {
        problems.push_back("key '" + key + "': default " + field.default_value + " does not fit: expected " +
                           problem->expected);
      }
    } catch (const Error& e) {
      problems.push_back(e.what());
    }
  }
  return problems;
}

}  // namespace patchbay::config
