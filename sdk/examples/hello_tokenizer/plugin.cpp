// Registers the hello_tokenizer plugin: its one component, identity-byte.
#include <patchbay/plugin.hpp>

#include "identity_byte_tokenizer.hpp"

PATCHBAY_PLUGIN("hello-tokenizer", "1.0.0",
                PATCHBAY_COMPONENT_LIST(&hello::kIdentityByteTokenizer));
