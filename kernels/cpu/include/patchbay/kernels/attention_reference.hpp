// Naive scaled-dot-product attention: the plain reference beside attention_flash. It takes
// the same AttentionParams and applies the same semantics (bottom-right causal mask, GQA head
// mapping, fully masked rows -> out 0 and lse -inf; see attention_flash.hpp) but materialises
// the full Tq x Tk score and probability matrices in double precision, one (batch, kv head)
// at a time per thread. It exists to be obviously right: tests compare the flash kernel to it
// and the benchmark reports it as "the naive version". Memory is O(threads * Tq * Tk).
#pragma once

#include <cstddef>
#include <string>

#include "patchbay/kernels/attention_flash.hpp"

namespace patchbay::kernels {

// Writes out and lse. Same validation and error contract as attention_flash_forward;
// `isa` is ignored (there is one plain code path).
[[nodiscard]] std::string attention_reference_forward(const AttentionParams& p);

// Writes dq, dk, dv. Reads q, k, v and dout only: it recomputes the probabilities and the
// forward output in double itself and ignores p.out and p.lse, so a flash backward checked
// against it is checked together with the forward values it was given.
[[nodiscard]] std::string attention_reference_backward(const AttentionParams& p);

// Bytes the reference allocates for one call (dominated by threads * Tq * Tk doubles; two
// such matrices in the backward). The benchmark uses it to skip sizes that would not fit.
std::size_t attention_reference_workspace_bytes(const AttentionParams& p, AttentionPass pass);

}  // namespace patchbay::kernels
