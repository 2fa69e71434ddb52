// Registers the attention_linear plugin: its one component, attention "linear".
#include <patchbay/plugin.hpp>

#include "linear_attention.hpp"

PATCHBAY_PLUGIN("attention-linear", "1.0.0",
                PATCHBAY_COMPONENT_LIST(&patchbay_linear::kLinearAttention));
