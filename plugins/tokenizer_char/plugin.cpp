// Registers the tokenizer_char plugin: its one component, "char".
#include <patchbay/plugin.hpp>

#include "char_component.hpp"

PATCHBAY_PLUGIN("tokenizer-char", "1.0.0", PATCHBAY_COMPONENT_LIST(&patchbay_char::kCharTokenizer));
