// Registers the tokenizer_bpe plugin: its one component, "bpe".
#include <patchbay/plugin.hpp>

#include "bpe_component.hpp"

PATCHBAY_PLUGIN("tokenizer-bpe", "1.1.0", PATCHBAY_COMPONENT_LIST(&patchbay_bpe::kBpeTokenizer));
