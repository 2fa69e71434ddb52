// Indexing ops (embedding gather, cross-entropy, cumulative sum, gather / scatter-add,
// sort / argsort / top-k), written by engine-ops2 following the pattern in
// engine/README.md. Included from engine/ops.hpp; declarations only.
#pragma once

#include "engine/tensor.hpp"

namespace patchbay::engine {}  // namespace patchbay::engine
