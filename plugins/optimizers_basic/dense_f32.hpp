// What the built-in optimizers' fused loops need from a tensor: a contiguous f32 buffer, on the
// CPU (their own vectorised loops) or, for adamw / sgd / lion, on a device whose host has the
// ops table's optimizer_update (version 12: the engine's kernel for that device). Parameters of
// another dtype, device or layout are refused when registered, naming the parameter, so that a
// step never fails half-way through the model.
#ifndef PATCHBAY_PLUGINS_OPTIMIZERS_BASIC_DENSE_F32_HPP_
#define PATCHBAY_PLUGINS_OPTIMIZERS_BASIC_DENSE_F32_HPP_

#include <cstdint>
#include <string>

#include "patchbay/optimizer.hpp"

namespace optimizers_basic {

// Loops with at least this many elements run on all OpenMP threads (below it the fork costs
// more than the update). Element-wise, so results do not depend on the thread count.
inline constexpr int64_t kParallelElements = 1 << 15;

// Throws PluginError(PB_STATUS_UNSUPPORTED) unless `param` is a contiguous f32 CPU tensor.
void require_dense_f32(const patchbay::Optimizer::Param& param, const char* optimizer);
// The same, but a device tensor is accepted where the host has optimizer_update.
void require_dense_f32_any_device(const patchbay::Optimizer::Param& param, const char* optimizer);
// Whether `t` lives on a device (not the CPU): its updates go through optimizer_update.
bool on_device(const patchbay::Tensor& t);
// One update of param (and state0 / state1, undefined where the rule has none; the bf16 copy
// when the host registered one) by the host's optimizer_update, on param's device.
void device_update(const pb_optimizer_update& update, const patchbay::Optimizer::Param& param,
                   const patchbay::Tensor& grad, const patchbay::Tensor& state0,
                   const patchbay::Tensor& state1);
// Same check for a gradient (the engine's grads are contiguous; a plugin-made one may not be).
void require_dense_f32_grad(const patchbay::Optimizer::Param& param, const patchbay::Tensor& grad,
                            const char* optimizer);
// A zero-filled f32 tensor shaped like `param`, on param's device.
patchbay::Tensor zeros_like(const patchbay::Tensor& param);
// A zero-valued i64 scalar (shape []) on the CPU: a per-parameter step count (the host reads it
// each step to make the update's scalars).
patchbay::Tensor step_counter(const patchbay::Tensor& like);

}  // namespace optimizers_basic

#endif  // PATCHBAY_PLUGINS_OPTIMIZERS_BASIC_DENSE_F32_HPP_
