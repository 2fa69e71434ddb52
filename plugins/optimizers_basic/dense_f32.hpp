// What the built-in optimizers' fused loops need from a tensor: a contiguous f32 CPU buffer.
// Parameters of another dtype, device or layout are refused when registered, naming the
// parameter, so that a step never fails half-way through the model.
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
// Same check for a gradient (the engine's grads are contiguous; a plugin-made one may not be).
void require_dense_f32_grad(const patchbay::Optimizer::Param& param, const patchbay::Tensor& grad,
                            const char* optimizer);
// A zero-filled f32 CPU tensor shaped like `param`.
patchbay::Tensor zeros_like(const patchbay::Tensor& param);
// A zero-valued i64 scalar (shape []): a per-parameter step count.
patchbay::Tensor step_counter(const patchbay::Tensor& like);

}  // namespace optimizers_basic

#endif  // PATCHBAY_PLUGINS_OPTIMIZERS_BASIC_DENSE_F32_HPP_
