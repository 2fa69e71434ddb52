// lion: state set-up and the fused update loop (formula in lion.hpp, README.md).
#include "lion.hpp"

#include <cmath>
#include <string>

#include "dense_f32.hpp"

namespace optimizers_basic {
namespace {

LionSettings read_settings(const patchbay::ConfigView& config) {
  LionSettings s;
  s.beta1 = config.get_float("beta1");
  s.beta2 = config.get_float("beta2");
  s.weight_decay = config.get_float("weight_decay");
  return s;
}

}  // namespace

Lion::Lion(const patchbay::Host&, const patchbay::ConfigView& config)
    : Lion(read_settings(config)) {}

Lion::Lion(const LionSettings& settings) : settings_(settings) {
  if (!(settings.beta1 >= 0.0 && settings.beta1 <= 1.0)) {
    throw patchbay::PluginError(
        PB_STATUS_INVALID_ARGUMENT,
        "lion: beta1 = " + std::to_string(settings.beta1) + " must lie in [0, 1]");
  }
  if (!(settings.beta2 >= 0.0 && settings.beta2 < 1.0)) {
    throw patchbay::PluginError(PB_STATUS_INVALID_ARGUMENT,
                                "lion: beta2 = " + std::to_string(settings.beta2) +
                                    " must lie in [0, 1) (1 never forgets)");
  }
  if (!(settings.weight_decay >= 0.0) || !std::isfinite(settings.weight_decay)) {
    throw patchbay::PluginError(PB_STATUS_INVALID_ARGUMENT,
                                "lion: weight_decay must be finite and >= 0");
  }
}

void Lion::init_state(const Param& param) {
  require_dense_f32_any_device(param, "lion");
  slot_of_.resize(param.index + 1, 0);
  slot_of_[param.index] = exp_avg_.size();
  exp_avg_.push_back(add_state("exp_avg/" + param.name, zeros_like(param.tensor)));
}

void Lion::update(const Param& param, const patchbay::Tensor& grad, double lr) {
  update_scaled(param, grad, lr, 1.0f);
}

void Lion::update_scaled(const Param& param, const patchbay::Tensor& grad, double lr,
                         float grad_scale) {
  require_dense_f32_grad(param, grad, "lion");
  if (on_device(param.tensor)) {
    pb_optimizer_update u{};
    u.struct_size = sizeof u;
    u.rule = PB_OPTIMIZER_LION;
    u.step = 1;  // Lion has no step-dependent scalar
    u.lr = lr;
    u.beta1 = settings_.beta1;
    u.beta2 = settings_.beta2;
    u.weight_decay = settings_.weight_decay * param.options.weight_decay_scale;
    u.grad_scale = grad_scale;
    device_update(u, param, grad, exp_avg_[slot_of_[param.index]], patchbay::Tensor());
    return;
  }
  lion_step(param.tensor.data<float>(), grad.data<float>(),
            exp_avg_[slot_of_[param.index]].data<float>(), param.tensor.numel(), lr,
            settings_.weight_decay * param.options.weight_decay_scale, settings_, grad_scale);
}

namespace {

// One pass over param, grad and exp_avg; kScaled reads g * scale (see lion.hpp).
template <bool kScaled>
void lion_loop(float* __restrict param, const float* __restrict grad, float* __restrict exp_avg,
               int64_t n, double lr, double weight_decay, const LionSettings& settings,
               float scale) {
  const float decay = static_cast<float>(1.0 - lr * weight_decay);
  const float step = static_cast<float>(lr);
  const float beta1 = static_cast<float>(settings.beta1);
  const float one_minus_beta1 = static_cast<float>(1.0 - settings.beta1);
  const float beta2 = static_cast<float>(settings.beta2);
  const float one_minus_beta2 = static_cast<float>(1.0 - settings.beta2);
#pragma omp parallel for simd schedule(static) if (n >= kParallelElements)
  for (int64_t i = 0; i < n; ++i) {
    const float g = kScaled ? grad[i] * scale : grad[i];
    const float c = beta1 * exp_avg[i] + one_minus_beta1 * g;
    const float sign = static_cast<float>((c > 0.0f) - (c < 0.0f));
    param[i] = param[i] * decay - step * sign;
    exp_avg[i] = beta2 * exp_avg[i] + one_minus_beta2 * g;
  }
}

}  // namespace

void lion_step(float* param, const float* grad, float* exp_avg, int64_t n, double lr,
               double weight_decay, const LionSettings& settings, float grad_scale) {
  if (grad_scale != 1.0f) {
    lion_loop<true>(param, grad, exp_avg, n, lr, weight_decay, settings, grad_scale);
  } else {
    lion_loop<false>(param, grad, exp_avg, n, lr, weight_decay, settings, grad_scale);
  }
}

}  // namespace optimizers_basic
