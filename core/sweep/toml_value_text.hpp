// A TOML value written as `--set` takes it and as reports show it: strings in double quotes,
// floats in their shortest round-trip form (0.9, not 0.90000000000000002), arrays and
// tables inline ({ kind = "sgd", momentum = 0.9 }).
#pragma once

#include <toml++/toml.h>

#include <string>

namespace patchbay::sweep {

std::string toml_value_text(const toml::node& node);

}  // namespace patchbay::sweep
