// bf16 operations through f32 primitives, for CPUs where oneDNN has no bf16 kernels
// (see bf16_through_f32.cpp for why the results equal a bf16 kernel's up to summation order).
// matmul() and eltwise_forward() call these by themselves when bf16_kernels_available() is
// false; callers outside core/onednn need only the probe (benchmarks name the path taken).
#pragma once

#include <cstdint>

#include "onednn/onednn_ops.hpp"

namespace patchbay::onednn {

// Whether this CPU's oneDNN builds bf16 matmul primitives (probed once per process).
bool bf16_kernels_available();

// Same contract as matmul() for bf16 A and B (validated by the caller).
void matmul_bf16_through_f32(const MatmulArgs& args);

// eltwise_forward() for a bf16 src/dst of `count` elements (src == dst allowed).
void eltwise_forward_bf16_through_f32(EltwiseKind kind, const void* src, void* dst,
                                      std::int64_t count);

}  // namespace patchbay::onednn
