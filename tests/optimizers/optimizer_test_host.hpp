// A pb_host_api carrying the engine's ops table, for running optimizer components in-process
// (linked from optimizers_basic_components) exactly as the host would call them.
#pragma once

#include "patchbay/host.h"

namespace optimizer_tests {

const pb_host_api* engine_host();

}  // namespace optimizer_tests
