// Comma-separated integers from the command line ("1,2,8" for --ids, --scaling, --sizes): each
// item checked, so "abc" or a 30-digit number is an error naming the option and the item, not
// "internal: stoll".
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace patchbay::cli {

// Empty items are skipped ("1,,2" is {1, 2}). Throws Error(kInvalidArgument) naming `option`
// when an item is not a decimal integer in [min, max].
std::vector<int64_t> parse_int_list(const std::string& text, const std::string& option,
                                    int64_t min = INT64_MIN, int64_t max = INT64_MAX);

}  // namespace patchbay::cli
