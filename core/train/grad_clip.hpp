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
// scale_grads(); clip_grad_norm() is the single-process composition. Gradients must be on the
// CPU (f32, bf16 or f16); others are refused with Error(kInvalidArgument).
#pragma once

#include <cstdint>
#include <vector>

#include "engine/tensor.hpp"

namespace patchbay::train {

inline constexpr int64_t kNormBlock = 1 << 16;
inline constexpr double kClipEpsilon = 1e-6;

// Sum of squared gradient elements over `params` (their .grad(); undefined grads are skipped).
double grad_square_sum(const std::vector<engine::Tensor>& params);
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

}  // namespace patchbay::train
