// Per-element optimizer updates shared by the fused CUDA update kernels and their CPU twins,
// with exactly the arithmetic of the CPU optimizer plugins (plugins/optimizers_basic: adamw,
// sgd, lion), so a GPU step and a CPU step from the same state agree to f32 rounding.
// Scalars are computed once per step on the host, in double, and rounded once to f32 (as the
// plugins do, and torch with Python-float scalars); make_*_scalars below do that.
#pragma once

#include <cmath>
#include <cstdint>

#include "patchbay/kernels/cuda/math/host_device.hpp"

namespace patchbay::kernels::cuda::math {

// ---- AdamW (decoupled weight decay; no amsgrad) ----
struct AdamWScalars {
  float decay;                  // 1 - lr * weight_decay
  float step_size;              // lr / (1 - beta1^t)
  float bias_correction2_sqrt;  // sqrt(1 - beta2^t)
  float one_minus_beta1, beta2, one_minus_beta2, eps;
  float grad_scale;  // the gradient is multiplied by this first (1 = none)
};

// step: the 1-based step number t.
inline AdamWScalars make_adamw_scalars(double lr, double beta1, double beta2, double eps,
                                       double weight_decay, int64_t step, float grad_scale) {
  const double bias_correction1 = 1.0 - std::pow(beta1, static_cast<double>(step));
  const double bias_correction2 = 1.0 - std::pow(beta2, static_cast<double>(step));
  return AdamWScalars{static_cast<float>(1.0 - lr * weight_decay),
                      static_cast<float>(lr / bias_correction1),
                      static_cast<float>(std::sqrt(bias_correction2)),
                      static_cast<float>(1.0 - beta1),
                      static_cast<float>(beta2),
                      static_cast<float>(1.0 - beta2),
                      static_cast<float>(eps),
                      grad_scale};
}

// Updates param, exp_avg (m), exp_avg_sq (v) in place; returns the new parameter.
PATCHBAY_HD float adamw_update(float& param, float grad, float& exp_avg, float& exp_avg_sq,
                               const AdamWScalars& c) {
  const float g = grad * c.grad_scale;
  const float p = param * c.decay;
  const float m = exp_avg + c.one_minus_beta1 * (g - exp_avg);
  const float v = exp_avg_sq * c.beta2 + c.one_minus_beta2 * (g * g);
  const float denom = sqrtf(v) / c.bias_correction2_sqrt + c.eps;
  exp_avg = m;
  exp_avg_sq = v;
  param = p - c.step_size * (m / denom);
  return param;
}

// ---- SGD (coupled weight decay, momentum with dampening, Nesterov; torch.optim.SGD) ----
struct SgdScalars {
  float weight_decay, neg_lr, momentum, one_minus_dampening;
  int use_momentum, nesterov, first_update;  // first_update: the buffer starts as d
  float grad_scale;
};

inline SgdScalars make_sgd_scalars(double lr, double momentum, double dampening, bool nesterov,
                                   double weight_decay, bool first_update, float grad_scale) {
  return SgdScalars{static_cast<float>(weight_decay),
                    static_cast<float>(-lr),
                    static_cast<float>(momentum),
                    static_cast<float>(1.0 - dampening),
                    momentum != 0.0 ? 1 : 0,
                    nesterov ? 1 : 0,
                    first_update ? 1 : 0,
                    grad_scale};
}

// momentum_buffer is read and written only when c.use_momentum.
PATCHBAY_HD float sgd_update(float& param, float grad, float& momentum_buffer,
                             const SgdScalars& c) {
  const float g = grad * c.grad_scale;
  float d = c.weight_decay != 0.0f ? g + c.weight_decay * param : g;
  if (c.use_momentum) {
    const float buf = c.first_update ? d : momentum_buffer * c.momentum + c.one_minus_dampening * d;
    momentum_buffer = buf;
    d = c.nesterov ? d + c.momentum * buf : buf;
  }
  param = param + c.neg_lr * d;
  return param;
}

// ---- Lion (Chen et al. 2023; decoupled weight decay) ----
struct LionScalars {
  float decay, step, beta1, one_minus_beta1, beta2, one_minus_beta2, grad_scale;
};

inline LionScalars make_lion_scalars(double lr, double beta1, double beta2, double weight_decay,
                                     float grad_scale) {
  return LionScalars{static_cast<float>(1.0 - lr * weight_decay),
                     static_cast<float>(lr),
                     static_cast<float>(beta1),
                     static_cast<float>(1.0 - beta1),
                     static_cast<float>(beta2),
                     static_cast<float>(1.0 - beta2),
                     grad_scale};
}

PATCHBAY_HD float lion_update(float& param, float grad, float& exp_avg, const LionScalars& c) {
  const float g = grad * c.grad_scale;
  const float interpolated = c.beta1 * exp_avg + c.one_minus_beta1 * g;
  const float sign = static_cast<float>((interpolated > 0.0f) - (interpolated < 0.0f));
  param = param * c.decay - c.step * sign;
  exp_avg = c.beta2 * exp_avg + c.one_minus_beta2 * g;
  return param;
}

}  // namespace patchbay::kernels::cuda::math
