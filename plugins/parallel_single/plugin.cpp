// Registers the parallel_single plugin: its one component, "single".
#include <patchbay/plugin.hpp>

#include "single_process.hpp"

PATCHBAY_PLUGIN("parallel-single", "1.0.0", PATCHBAY_COMPONENT_LIST(&patchbay_parallel_single::kSingle));
