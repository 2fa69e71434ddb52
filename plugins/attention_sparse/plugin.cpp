// Registers the attention_sparse plugin: its one component, attention "sparse".
#include <patchbay/plugin.hpp>

#include "sparse_attention.hpp"

PATCHBAY_PLUGIN("attention-sparse", "1.0.0",
                PATCHBAY_COMPONENT_LIST(&patchbay_sparse::kSparseAttention));
