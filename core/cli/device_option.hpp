// --device for the commands that run a model (train, eval, generate, bench train): it sets
// [run] device, and before any work starts the device is checked: `cuda` in a build without
// CUDA, or on a machine without a usable GPU, is refused with the reason and what to do.
// A checkpoint's stored config keeps the device it was trained on; --device cpu evaluates,
// samples from or resumes a GPU run on the CPU (checkpoints are device-independent).
#pragma once

#include <boost/program_options.hpp>
#include <string>

#include "config/config_document.hpp"
#include "engine/device.hpp"

namespace patchbay::cli {

void add_device_option(boost::program_options::options_description& options, std::string& device);

// Writes `device` (when not empty) into run.device as --set would, then returns the device
// run.device names once it is usable (initialising CUDA for `cuda`). Throws patchbay::Error
// (kInvalidArgument) naming run.device's source and the reason otherwise.
engine::Device apply_device_option(config::ResolvedConfig& config, const std::string& device);

}  // namespace patchbay::cli
