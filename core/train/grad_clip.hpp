// Global-norm gradient clipping (torch.nn.utils.clip_grad_norm_ with norm_type 2, scaling
// only when the norm exceeds max_norm).
//
//   norm = sqrt(sum over parameters with a defined grad of sum(g^2))   (accumulated in double)
//   norm > max_norm:  every grad *= max_norm / (norm + 1e-6)
// The pre-clip norm is returned. A NaN or infinite norm is returned as it is and no gradient is
// touched: the trainer decides (skip the step, stop). The sum is deterministic — fixed blocks
// of kNormBlock elements (each a vector reduction in the compiled lane order) summed in block
// order — so a run is bit-identical whatever the thread count.
//
// For data parallelism the trainer can all-reduce grad_square_sum() across ranks itself and call
// scale_grads(); clip_grad_norm() is the single-process composition. The trainer itself takes
// the norm only and hands clip_factor() to optimizer_step_scaled(), which folds the scaling
// into the optimizer's update pass (no separate pass over the gradients). Gradients are
// contiguous f32, bf16 or f16 (others are refused with Error(kInvalidArgument)); on a device
// (CUDA) they are summed there in f32 by the device's reduce kernel and read once per device,
// so a GPU run's norm agrees with a CPU run's to f32 rounding, not bit for bit.
#pragma once

#include <cstdint>
#include <vector>

#include "engine/tensor.hpp"
#include "runtime/optimizer_handle.hpp"

namespace patchbay::train {

inline constexpr int64_t kNormBlock = 1 << 16;
inline constexpr double kClipEpsilon = 1e-6;

// Sum of squared gradient elements over `params` (their .grad(); undefined grads are skipped):
// param_grad_square_sum of each, added in the order given.
double grad_square_sum(const std::vector<engine::Tensor>& params);
// Sum of squared elements of one parameter's .grad() (0 when undefined), in the fixed blocks
// described above.
double param_grad_square_sum(const engine::Tensor& param);
// The same sum for gradients that all live on one device, left there: a device f32 scalar
// (the device's fixed-order reduce kernels), never read back. Undefined when no parameter has
// a gradient; Error(kInvalidArgument) for a gradient on the CPU or on another device.
engine::Tensor device_grad_square_sum(const std::vector<engine::Tensor>& params);
// sqrt(grad_square_sum(params)).
double global_grad_norm(const std::vector<engine::Tensor>& params);
// Multiplies every defined grad by `factor` in place.
void scale_grads(const std::vector<engine::Tensor>& params, double factor);

struct ClipResult {
  double norm = 0;       // before clipping
  bool finite = true;    // false: NaN or Inf; nothing was scaled
  bool clipped = false;  // grads were scaled by max_norm / (norm + 1e-6)
};
// max_norm must be > 0 (Error(kInvalidArgument) otherwise; the trainer skips clipping when
// clipping is off).
ClipResult clip_grad_norm(const std::vector<engine::Tensor>& params, double max_norm);

// The factor clip_grad_norm scales by: max_norm / (norm + 1e-6) when max_norm > 0 and norm is
// finite and above max_norm; 1 otherwise (clipping off, not needed, or a NaN / Inf norm).
double clip_factor(double norm, double max_norm);

// One optimizer update with learning rate lr and every gradient of `params` (the parameters
// registered with `optimizer`) read times grad_scale: clipping in one pass over the
// parameters. An optimizer with step_scaled (optimizer.h minor 1) multiplies inside its own
// update loop and leaves the gradients as they are; for one without it (1.0 plugins) the
// gradients are scaled in place first (scale_grads) and step() runs, which for the built-in
// optimizers gives the same bits (both use g * (float)grad_scale). grad_scale 1: step().
void optimizer_step_scaled(runtime::OptimizerHandle& optimizer,
                           const std::vector<engine::Tensor>& params, double lr, double grad_scale);

}  // namespace patchbay::train
