// Registers the local_attention plugin: its one component, attention "local".
#include <patchbay/plugin.hpp>

#include "local_attention.hpp"

PATCHBAY_PLUGIN("local-attention", "1.0.0",
                PATCHBAY_COMPONENT_LIST(&local_attention::kLocalAttention));
