// adamw: state set-up and the fused update loop (formula in adamw.hpp, README.md).
#include "adamw.hpp"

#include <algorithm>
#include <cmath>
#include <string>

#include "dense_f32.hpp"

namespace optimizers_basic {
namespace {

AdamWSettings read_settings(const patchbay::ConfigView& config) {
  AdamWSettings s;
  s.beta1 = config.get_float("beta1");
  s.beta2 = config.get_float("beta2");
  s.eps = config.get_float("eps");
  s.weight_decay = config.get_float("weight_decay");
  s.amsgrad = config.get_bool("amsgrad");
  return s;
}

void check_unit_interval(double v, const char* key) {
  if (!(v >= 0.0 && v < 1.0)) {
    throw patchbay::PluginError(PB_STATUS_INVALID_ARGUMENT,
                                std::string("adamw: ") + key + " = " + std::to_string(v) +
                                    " must lie in [0, 1) (1 never forgets)");
  }
}

}  // namespace

AdamW::AdamW(const patchbay::Host&, const patchbay::ConfigView& config)
    : AdamW(read_settings(config)) {}

AdamW::AdamW(const AdamWSettings& settings) : settings_(settings) {
  check_unit_interval(settings.beta1, "beta1");
  check_unit_interval(settings.beta2, "beta2");
  if (!(settings.eps >= 0.0) || !std::isfinite(settings.eps)) {
    throw patchbay::PluginError(PB_STATUS_INVALID_ARGUMENT, "adamw: eps must be finite and >= 0");
  }
  if (!(settings.weight_decay >= 0.0) || !std::isfinite(settings.weight_decay)) {
    throw patchbay::PluginError(PB_STATUS_INVALID_ARGUMENT,
                                "adamw: weight_decay must be finite and >= 0");
  }
}

void AdamW::init_state(const Param& param) {
  require_dense_f32(param, "adamw");
  Moments m;
  m.step = add_state("step/" + param.name, step_counter(param.tensor));
  m.exp_avg = add_state("exp_avg/" + param.name, zeros_like(param.tensor));
  m.exp_avg_sq = add_state("exp_avg_sq/" + param.name, zeros_like(param.tensor));
  if (settings_.amsgrad) m.max_exp_avg_sq = add_state("max_exp_avg_sq/" + param.name, zeros_like(param.tensor));
  moment_of_.resize(param.index + 1, 0);
  moment_of_[param.index] = moments_.size();
  moments_.push_back(std::move(m));
}

void AdamW::update(const Param& param, const patchbay::Tensor& grad, double lr) {
  require_dense_f32_grad(param, grad, "adamw");
  Moments& m = moments_[moment_of_[param.index]];
  int64_t* step = m.step.data<int64_t>();
  *step += 1;
  adamw_step(param.tensor.data<float>(), grad.data<float>(), m.exp_avg.data<float>(),
             m.exp_avg_sq.data<float>(), param.tensor.numel(), *step, lr,
             settings_.weight_decay * param.options.weight_decay_scale, settings_,
             settings_.amsgrad ? m.max_exp_avg_sq.data<float>() : nullptr);
}

void adamw_step(float* param, const float* grad, float* exp_avg, float* exp_avg_sq, int64_t n,
                int64_t t, double lr, double weight_decay, const AdamWSettings& settings,
                float* max_exp_avg_sq) {
  // Scalars in double, rounded once to f32 as torch does with Python-float scalars.
  const double bias_correction1 = 1.0 - std::pow(settings.beta1, static_cast<double>(t));
  const double bias_correction2 = 1.0 - std::pow(settings.beta2, static_cast<double>(t));
  const float decay = static_cast<float>(1.0 - lr * weight_decay);
  const float step_size = static_cast<float>(lr / bias_correction1);
  const float bias_correction2_sqrt = static_cast<float>(std::sqrt(bias_correction2));
  const float one_minus_beta1 = static_cast<float>(1.0 - settings.beta1);
  const float beta2 = static_cast<float>(settings.beta2);
  const float one_minus_beta2 = static_cast<float>(1.0 - settings.beta2);
  const float eps = static_cast<float>(settings.eps);
  const bool amsgrad = settings.amsgrad;
#pragma omp parallel for simd schedule(static) if (n >= kParallelElements)
  for (int64_t i = 0; i < n; ++i) {
    const float g = grad[i];
    const float p = param[i] * decay;
    const float m = exp_avg[i] + one_minus_beta1 * (g - exp_avg[i]);
    const float v = exp_avg_sq[i] * beta2 + one_minus_beta2 * (g * g);
    float v_used = v;
    if (amsgrad) {
      v_used = std::max(max_exp_avg_sq[i], v);
      max_exp_avg_sq[i] = v_used;
    }
    const float denom = std::sqrt(v_used) / bias_correction2_sqrt + eps;
    exp_avg[i] = m;
    exp_avg_sq[i] = v;
    param[i] = p - step_size * (m / denom);
  }
}

}  // namespace optimizers_basic
