// The engine's batch-invariance policy (issue 39; docs/reliability.md, "Batch-invariant
// numerics"): whether an op must give a row the same bits whatever other rows share the call.
// Where it must, matmul runs f32 x · Wᵀ through the row-invariant kernel at every row count,
// and layer norm and the unary activations take oneDNN at every size (their loops, faster for
// small tensors, round differently). PATCHBAY_BATCH_INVARIANCE, read at every call:
//   unset or "inference": wanted unless the op records a gradient (eval, generate, decoding);
//   "always": wanted in training too (slower steps); "off": never (the former size-based
//   choices everywhere).
#pragma once

namespace patchbay::engine {

bool batch_invariance_wanted(bool records_gradient);

}  // namespace patchbay::engine
