// Human words for TOML values and schema types, used in "expected ... found ..." messages.
#pragma once

#include <string>

#include <toml++/toml.h>

#include "patchbay/component.h"

namespace patchbay::config {

// "integer", "float", "string", "boolean", "array", "table", "date", "time", "date-time".
std::string toml_type_name(const toml::node& node);
// The type and a short rendering of the value: `string "bpe"`, `integer 12`,
// `array [1, 2]`, `table {...}` (long values are cut).
std::string describe_value(const toml::node& node);
// The value as a TOML literal on one line: basic strings with escapes, floats in their
// shortest exact form (0.1, not 0.10000000000000001), arrays as [a, b], tables as
// inline tables {k = v}.
std::string format_toml_value(const toml::node& node);
// "boolean", "integer", "float", "string", "array of strings".
std::string schema_type_name(pb_value_type type);

}  // namespace patchbay::config
