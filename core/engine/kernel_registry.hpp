// Introspection of the kernel dispatch table (dispatch.hpp), for backends and tests: which
// ops have a kernel for a device type, and re-registration of one device's kernels for
// another. The host stand-in device (host_standin_device.hpp) uses alias_kernels to run the
// CPU kernels on its host memory; `kernels_missing_for` lists what a device still lacks
// against the CPU (the work list of a new backend).
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "engine/device.hpp"

namespace patchbay::engine {

// "cpu" or "cuda".
const char* device_type_name(DeviceType type);

bool has_kernel(std::string_view op, DeviceType device);
// Every op with a kernel for `device`, sorted by name.
std::vector<std::string> kernel_names(DeviceType device);
// Ops with a kernel for the CPU and none for `device`, sorted.
std::vector<std::string> kernels_missing_for(DeviceType device);
// Registers the kernel `from` has for each op as `to`'s kernel too (replacing any), except
// the ops named in `except`, which lose any kernel for `to`. The signatures are the ops'
// own, so a kernel written for host memory must only be aliased to a device whose memory the
// host can address (the stand-in); never alias CPU kernels to a real GPU.
void alias_kernels(DeviceType from, DeviceType to, const std::vector<std::string>& except = {});
// Removes the kernel `op` has for `device` (nothing when none).
void unregister_kernel(std::string_view op, DeviceType device);

}  // namespace patchbay::engine
