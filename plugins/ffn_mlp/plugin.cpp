// Registers the ffn_mlp plugin: its one component, "mlp".
#include <patchbay/plugin.hpp>

#include "mlp.hpp"

PATCHBAY_PLUGIN("ffn-mlp", "1.0.0", PATCHBAY_COMPONENT_LIST(&patchbay_ffn_mlp::kMlp));
