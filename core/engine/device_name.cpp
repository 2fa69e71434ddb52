// parse_device (device_name.hpp).
#include "engine/device_name.hpp"

#include <charconv>
#include <string>

#include "common/error.hpp"

namespace patchbay::engine {

Device parse_device(std::string_view name) {
  const size_t colon = name.find(':');
  const std::string_view type = name.substr(0, colon);
  int index = 0;
  bool index_ok = true;
  if (colon != std::string_view::npos) {
    const std::string_view digits = name.substr(colon + 1);
    const auto [end, error] = std::from_chars(digits.data(), digits.data() + digits.size(), index);
    index_ok = !digits.empty() && error == std::errc() && end == digits.data() + digits.size() &&
               index >= 0;
  }
  if (index_ok && type == "cpu" && index == 0) return cpu();
  if (index_ok && type == "cuda") return Device{DeviceType::kCuda, index};
  throw Error(ErrorKind::kInvalidArgument,
              "unknown device '" + std::string(name) + "': expected cpu, cuda or cuda:N (N >= 0)");
}

}  // namespace patchbay::engine
