// Registers the lion_optimizer plugin: its one component, optimizer "lion".
#include <patchbay/plugin.hpp>

#include "lion.hpp"

PATCHBAY_PLUGIN("lion-optimizer", "1.0.0", PATCHBAY_COMPONENT_LIST(&lion_optimizer::kLion));
