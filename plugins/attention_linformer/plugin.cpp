// Registers the attention_linformer plugin: its one component, attention "linformer".
#include <patchbay/plugin.hpp>

#include "linformer_attention.hpp"

PATCHBAY_PLUGIN("attention-linformer", "1.0.0",
                PATCHBAY_COMPONENT_LIST(&patchbay_linformer::kLinformerAttention));
