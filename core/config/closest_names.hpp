// "Did you mean ...?" suggestions: the candidates nearest to a misspelt name by edit
// distance (Levenshtein, case-insensitive). Used for unknown config keys, sections,
// choices, component names and CLI commands.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>
#include <vector>

namespace patchbay::config {

// Levenshtein distance between a and b, comparing ASCII letters case-insensitively.
size_t edit_distance(std::string_view a, std::string_view b);

// Up to `max_results` candidates whose distance to `name` is at most
// max(2, name.size() / 3), nearest first (ties alphabetical). Empty when none is close.
std::vector<std::string> closest_names(std::string_view name,
                                       const std::vector<std::string>& candidates,
                                       size_t max_results = 3);

// "'a', 'b' or 'c'" for messages.
std::string quote_alternatives(const std::vector<std::string>& names);
// "a, b, c" for lists of valid names.
std::string join_names(const std::vector<std::string>& names);

}  // namespace patchbay::config
