// One pb_config_field at work: checking a value against it, describing what it expects,
// parsing its TOML-literal default, and checking that a declaration itself is sound.
#pragma once

#include <optional>
#include <span>
#include <string>
#include <vector>

#include <toml++/toml.h>

#include "patchbay/component.h"

namespace patchbay::config {

// Why a value does not fit its field. `item_suffix` is "[i]" when one array item is wrong.
struct ValueProblem {
  std::string problem;   // "wrong type", "value out of range", "value not among the choices"
  std::string expected;
  std::string found;
  std::string fix;
  std::string item_suffix;
};

// nullopt when `value` is valid for `field`: the right type (an integer is a valid float),
// inside [min_value, max_value] when has_range, one of `choices` when given.
std::optional<ValueProblem> check_value(const pb_config_field& field, const toml::node& value);

// "an integer in [1, 65536]", "a string, one of 'a', 'b'", "an array of strings".
std::string describe_expectation(const pb_config_field& field);

// The '|'-separated choices of a STRING field (empty when none).
std::vector<std::string> split_choices(const pb_config_field& field);

// {value = <default>} parsed from the field's TOML literal; nullopt when the field has no
// default. Throws patchbay::Error (kInternal) when the literal is not valid TOML.
std::optional<toml::table> parse_default(const pb_config_field& field);

// Problems with the declarations themselves, one sentence each: missing key, duplicate
// key, unknown type, required with a default, optional without one, a default that does
// not parse or does not fit its own type/range/choices, min > max.
std::vector<std::string> check_field_declarations(std::span<const pb_config_field> fields);

}  // namespace patchbay::config
