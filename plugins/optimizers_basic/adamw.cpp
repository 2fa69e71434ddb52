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
  update_scaled(param, grad, lr, 1.0f);
}

void AdamW::update_scaled(const Param& param, const patchbay::Tensor& grad, double lr,
                          float grad_scale) {
  require_dense_f32_grad(param, grad, "adamw");
  Moments& m = moments_[moment_of_[param.index]];
  int64_t* step = m.step.data<int64_t>();
  *step += 1;
  adamw_step(param.tensor.data<float>(), grad.data<float>(), m.exp_avg.data<float>(),
             m.exp_avg_sq.data<float>(), param.tensor.numel(), *step, lr,
             settings_.weight_decay * param.options.weight_decay_scale, settings_,
             settings_.amsgrad ? m.max_exp_avg_sq.data<float>() : nullptr, grad_scale);
}

namespace {

struct AdamWScalars {
  float decay, step_size, bias_correction2_sqrt, one_minus_beta1, beta2, one_minus_beta2, eps,
      grad_scale;
};

// One pass: reads param, grad, exp_avg, exp_avg_sq (and max_exp_avg_sq) once, writes param and
// the moments once. kScaled multiplies the gradient by grad_scale first (the f32 product the
// host's in-place scaling would have stored), so scaled and pre-scaled runs agree bit for bit.
template <bool kScaled, bool kAmsgrad>
void adamw_loop(float* __restrict param, const float* __restrict grad, float* __restrict exp_avg,
                float* __restrict exp_avg_sq, float* __restrict max_exp_avg_sq, int64_t n,
                const AdamWScalars& c) {
  const float decay = c.decay, step_size = c.step_size, bc2_sqrt = c.bias_correction2_sqrt;
  const float one_minus_beta1 = c.one_minus_beta1, beta2 = c.beta2,
              one_minus_beta2 = c.one_minus_beta2, eps = c.eps, scale = c.grad_scale;
#pragma omp parallel for simd schedule(static) if (n >= kParallelElements)
  for (int64_t i = 0; i < n; ++i) {
    const float g = kScaled ? grad[i] * scale : grad[i];
    const float p = param[i] * decay;
    const float m = exp_avg[i] + one_minus_beta1 * (g - exp_avg[i]);
    const float v = exp_avg_sq[i] * beta2 + one_minus_beta2 * (g * g);
    float v_used = v;
    if constexpr (kAmsgrad) {
      v_used = max_exp_avg_sq[i] < v ? v : max_exp_avg_sq[i];  // std::max, in a vectorisable form
      max_exp_avg_sq[i] = v_used;
    }
    const float denom = std::sqrt(v_used) / bc2_sqrt + eps;
    exp_avg[i] = m;
    exp_avg_sq[i] = v;
    param[i] = p - step_size * (m / denom);
  }
}

}  // namespace

void adamw_step(float* param, const float* grad, float* exp_avg, float* exp_avg_sq, int64_t n,
                int64_t t, double lr, double weight_decay, const AdamWSettings& settings,
                float* max_exp_avg_sq, float grad_scale) {
  // Scalars in double, rounded once to f32 as torch does with Python-float scalars.
  const double bias_correction1 = 1.0 - std::pow(settings.beta1, static_cast<double>(t));
  const double bias_correction2 = 1.0 - std::pow(settings.beta2, static_cast<double>(t));
  AdamWScalars c;
  c.decay = static_cast<float>(1.0 - lr * weight_decay);
  c.step_size = static_cast<float>(lr / bias_correction1);
  c.bias_correction2_sqrt = static_cast<float>(std::sqrt(bias_correction2));
  c.one_minus_beta1 = static_cast<float>(1.0 - settings.beta1);
  c.beta2 = static_cast<float>(settings.beta2);
  c.one_minus_beta2 = static_cast<float>(1.0 - settings.beta2);
  c.eps = static_cast<float>(settings.eps);
  c.grad_scale = grad_scale;
  const bool scaled = grad_scale != 1.0f;
  if (settings.amsgrad) {
    scaled ? adamw_loop<true, true>(param, grad, exp_avg, exp_avg_sq, max_exp_avg_sq, n, c)
           : adamw_loop<false, true>(param, grad, exp_avg, exp_avg_sq, max_exp_avg_sq, n, c);
  } else {
    scaled ? adamw_loop<true, false>(param, grad, exp_avg, exp_avg_sq, nullptr, n, c)
           : adamw_loop<false, false>(param, grad, exp_avg, exp_avg_sq, nullptr, n, c);
  }
}

}  // namespace optimizers_basic
