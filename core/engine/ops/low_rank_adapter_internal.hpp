// The engine's side of low-rank adapters (engine/low_rank_adapter.hpp) that matmul, linear,
// embedding and autocast consult; not for callers outside core/engine/ops.
#pragma once

#include <optional>

#include "engine/tensor.hpp"

namespace patchbay::engine::detail {

// True when any adapter is attached anywhere (one relaxed atomic load: the ops' fast path).
bool low_rank_adapters_present();
// The product y = op(a) · op(b) with the adapters on b's storage applied, or nullopt when
// neither operand's storage carries one. Throws for uses the adapters cannot follow.
std::optional<Tensor> adapted_matmul(const Tensor& a, const Tensor& b, bool transpose_a,
                                     bool transpose_b);
// True when x's storage carries an adapter.
bool carries_low_rank_adapter(const Tensor& x);
// Throws Error(kInvalidArgument) when x's storage carries an adapter: `use` (e.g. "an
// embedding lookup") reads it in a form the adapter cannot follow.
void refuse_adapted_operand(const Tensor& x, const char* use);
// The adapted parameter whose storage x is a view of (for autocast's bf16 weight cache), or
// nullopt.
std::optional<Tensor> adapted_parameter_of(const Tensor& x);

// matmul without looking for adapters (engine/ops/matmul.cpp): the adapted product's base,
// and every backward product (whose operands are gradients and saved tensors).
Tensor matmul_plain(const Tensor& a, const Tensor& b, bool transpose_a, bool transpose_b);

}  // namespace patchbay::engine::detail
