// Positional-encoding ops that act on attention heads rather than on embeddings. Declared
// apart from engine/ops.hpp so that only their users (the ops table, attention code, tests)
// include them.
#pragma once

#include <cstdint>

#include "engine/tensor.hpp"

namespace patchbay::engine {

// Rotary position embedding (RoPE, Su et al. 2021) in the GPT-NeoX / LLaMA "rotate half"
// convention: the last dim D (even) is split into halves x1 = x[..., :D/2] and
// x2 = x[..., D/2:], and pair (x1[i], x2[i]) is rotated by the angle
//   a(p, i) = p * theta^(-2i/D),  i in [0, D/2),  p = position_offset + t
// where t is the index along dim -2:
//   out[..., i]       = x1[i] cos a - x2[i] sin a
//   out[..., i + D/2] = x2[i] cos a + x1[i] sin a
// (The GPT-J / original-paper variant rotates adjacent pairs (2i, 2i+1) instead; weights are
// not interchangeable between the two.)
// x [..., T, D] float (typically q or k as [B, H, T, D]); position_offset >= 0 (the number of
// positions before x, e.g. the KV-cache length during decoding); theta > 0 (10000 in
// LLaMA / GPT-NeoX). Output: x's shape and dtype, computed in f32 with angles in double.
// Backward: the inverse rotation (angle -a) of the output gradient; positions get none.
Tensor rotary_embedding(const Tensor& x, int64_t position_offset, double theta);

}  // namespace patchbay::engine
