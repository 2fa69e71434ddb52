// Registers the attention_dense plugin: its one component, attention "dense".
#include <patchbay/plugin.hpp>

#include "dense_attention.hpp"

PATCHBAY_PLUGIN("attention-dense", "1.0.0",
                PATCHBAY_COMPONENT_LIST(&patchbay_dense::kDenseAttention));
