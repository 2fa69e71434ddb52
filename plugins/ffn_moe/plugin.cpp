// Registers the ffn_moe plugin: "moe" (token choice) and "moe_expert_choice".
#include <patchbay/plugin.hpp>

#include "expert_choice.hpp"
#include "moe_layer.hpp"

PATCHBAY_PLUGIN("ffn-moe", "1.0.0",
                PATCHBAY_COMPONENT_LIST(&patchbay_ffn_moe::kMoe, &patchbay_ffn_moe::kExpertChoice));
