// Registers the attention_lsh plugin: its one component, attention "lsh".
#include <patchbay/plugin.hpp>

#include "lsh_attention.hpp"

PATCHBAY_PLUGIN("attention-lsh", "1.0.0", PATCHBAY_COMPONENT_LIST(&patchbay_lsh::kLshAttention));
