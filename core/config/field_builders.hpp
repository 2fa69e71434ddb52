// Short constructors for pb_config_field records, for the host's own sections (and for
// tests). String arguments must be static (literals): the records keep the pointers.
#pragma once

#include "patchbay/component.h"

namespace patchbay::config::fields {

constexpr pb_config_field make_field(const char* key, pb_value_type type, const char* default_literal,
                                     const char* doc) {
  pb_config_field field{};
  field.struct_size = sizeof(pb_config_field);
  field.key = key;
  field.type = type;
  field.required = default_literal == nullptr ? 1 : 0;
  field.default_value = default_literal;
  field.doc = doc;
  return field;
}

// Required string (no default).
constexpr pb_config_field required_string(const char* key, const char* doc) {
  return make_field(key, PB_TYPE_STRING, nullptr, doc);
}
// Optional string; `default_literal` is a TOML literal with quotes: "\"kjv\"".
// `choices` is '|'-separated or nullptr.
constexpr pb_config_field string_field(const char* key, const char* default_literal, const char* doc,
                                       const char* choices = nullptr) {
  pb_config_field field = make_field(key, PB_TYPE_STRING, default_literal, doc);
  field.choices = choices;
  return field;
}
constexpr pb_config_field bool_field(const char* key, const char* default_literal, const char* doc) {
  return make_field(key, PB_TYPE_BOOL, default_literal, doc);
}
constexpr pb_config_field int_field(const char* key, const char* default_literal, double min_value,
                                    double max_value, const char* doc) {
  pb_config_field field = make_field(key, PB_TYPE_INT, default_literal, doc);
  field.has_range = 1;
  field.min_value = min_value;
  field.max_value = max_value;
  return field;
}
constexpr pb_config_field float_field(const char* key, const char* default_literal, double min_value,
                                      double max_value, const char* doc) {
  pb_config_field field = make_field(key, PB_TYPE_FLOAT, default_literal, doc);
  field.has_range = 1;
  field.min_value = min_value;
  field.max_value = max_value;
  return field;
}
constexpr pb_config_field string_array_field(const char* key, const char* default_literal, const char* doc) {
  return make_field(key, PB_TYPE_STRING_ARRAY, default_literal, doc);
}

}  // namespace patchbay::config::fields
