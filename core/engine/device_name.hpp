// Device names as users write them ("cpu", "cuda", "cuda:1") and back. Kept out of
// device.hpp so that config and CLI code can parse names without touching a header every
// engine file includes.
#pragma once

#include <string_view>

#include "engine/device.hpp"

namespace patchbay::engine {

// "cpu" (or "cpu:0"), "cuda" (= "cuda:0") or "cuda:N". Throws patchbay::Error
// (kInvalidArgument) naming the valid forms otherwise.
Device parse_device(std::string_view name);

}  // namespace patchbay::engine
