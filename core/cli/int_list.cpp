// parse_int_list: std::from_chars per item, whole item consumed, range checked.
#include "cli/int_list.hpp"

#include <charconv>
#include <sstream>

#include "common/error.hpp"

namespace patchbay::cli {

std::vector<int64_t> parse_int_list(const std::string& text, const std::string& option, int64_t min,
                                    int64_t max) {
  std::vector<int64_t> values;
  std::stringstream in(text);
  for (std::string item; std::getline(in, item, ',');) {
    if (item.empty()) continue;
    int64_t value = 0;
    const auto [end, error] = std::from_chars(item.data(), item.data() + item.size(), value);
    if (error != std::errc() || end != item.data() + item.size() || value < min || value > max)
      throw Error(ErrorKind::kInvalidArgument,
                  option + ": '" + item.substr(0, 40) + "' is not an integer in [" +
                      std::to_string(min) + ", " + std::to_string(max) +
                      "]; expected comma-separated integers, e.g. 1,2,8");
    values.push_back(value);
  }
  return values;
}

}  // namespace patchbay::cli
