// Registers the attention_performer plugin: its one component, attention "performer".
#include <patchbay/plugin.hpp>

#include "performer_attention.hpp"

PATCHBAY_PLUGIN("attention-performer", "1.1.0",
                PATCHBAY_COMPONENT_LIST(&patchbay_performer::kPerformerAttention));
