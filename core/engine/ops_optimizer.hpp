// Fused optimizer updates as an engine op (ops table version 12, optimizer_update): one pass
// over a parameter, its gradient and the rule's state, on the parameter's device, with the
// per-element arithmetic the built-in optimizer plugins use (kernels/cuda/math/
// optimizer_update.hpp, shared by the CPU loop here and the CUDA kernels). The plugins keep
// their own vectorised CPU loops and call this for parameters on a device.
#pragma once

#include <cstdint>

#include "engine/tensor.hpp"

namespace patchbay::engine {

enum class OptimizerRule { kAdamW, kSgd, kLion };

// Hyperparameters of one update (the fields of pb_optimizer_update; ops.h gives the formulas).
struct OptimizerUpdate {
  OptimizerRule rule = OptimizerRule::kAdamW;
  int64_t step = 1;  // 1-based
  double lr = 0.0, beta1 = 0.9, beta2 = 0.999, eps = 1e-8, weight_decay = 0.0;
  double momentum = 0.0, dampening = 0.0;
  bool nesterov = false;
  float grad_scale = 1.0f;
};

// Updates param (and the rule's state: AdamW state0 = exp_avg, state1 = exp_avg_sq; SGD state0 =
// momentum buffer or undefined without momentum; Lion state0 = exp_avg) in place; bf16_copy,
// when defined, receives the new values rounded to bf16. All on param's device, contiguous f32
// of param's shape (bf16_copy bf16); refused otherwise, naming the tensor. Not recorded.
void optimizer_update(const OptimizerUpdate& update, Tensor& param, const Tensor& grad,
                      Tensor& state0, Tensor& state1, Tensor& bf16_copy);

}  // namespace patchbay::engine
