// adamw: state set-up and the fused update loop (formula in adamw.hpp, README.md).
#include "adamw.hpp"

#include <algorithm>
#include <cmath>
#include <string>

#include "adamw_loop.hpp"
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
  require_dense_f32_any_device(param, "adamw");
  if (settings_.amsgrad && on_device(param.tensor)) {
    throw patchbay::PluginError(PB_STATUS_UNSUPPORTED,
                                "adamw: amsgrad = true for parameter '" + param.name +
                                    "' on a device needs an update kernel not written yet; set "
                                    "amsgrad = false or train on the cpu");
  }
  Moments m;
  m.step = add_state("step/" + param.name, step_counter(param.tensor));
  m.exp_avg = add_state("exp_avg/" + param.name, zeros_like(param.tensor));
  m.exp_avg_sq = add_state("exp_avg_sq/" + param.name, zeros_like(param.tensor));
  if (settings_.amsgrad)
    m.max_exp_avg_sq = add_state("max_exp_avg_sq/" + param.name, zeros_like(param.tensor));
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
  if (on_device(param.tensor)) {
    pb_optimizer_update u{};
    u.struct_size = sizeof u;
    u.rule = PB_OPTIMIZER_ADAMW;
    u.step = *step;
    u.lr = lr;
    u.beta1 = settings_.beta1;
    u.beta2 = settings_.beta2;
    u.eps = settings_.eps;
    u.weight_decay = settings_.weight_decay * param.options.weight_decay_scale;
    u.grad_scale = grad_scale;
    device_update(u, param, grad, m.exp_avg, m.exp_avg_sq);
    return;
  }
  adamw_step(param.tensor.data<float>(), grad.data<float>(), m.exp_avg.data<float>(),
             m.exp_avg_sq.data<float>(), param.tensor.numel(), *step, lr,
             settings_.weight_decay * param.options.weight_decay_scale, settings_,
             settings_.amsgrad ? m.max_exp_avg_sq.data<float>() : nullptr, grad_scale,
             param.bf16_copy.defined() ? param.bf16_copy.data<uint16_t>() : nullptr);
}

void adamw_step(float* param, const float* grad, float* exp_avg, float* exp_avg_sq, int64_t n,
                int64_t t, double lr, double weight_decay, const AdamWSettings& settings,
                float* max_exp_avg_sq, float grad_scale, uint16_t* bf16_copy) {
  // Scalars in double, rounded once to f32 as torch does with Python-float scalars.
  const double bias_correction1 = 1.0 - std::pow(settings.beta1, static_cast<double>(t));
  const double bias_correction2 = 1.0 - std::pow(settings.beta2, static_cast<double>(t));
  AdamWLoop loop;
  loop.param = param;
  loop.grad = grad;
  loop.exp_avg = exp_avg;
  loop.exp_avg_sq = exp_avg_sq;
  loop.max_exp_avg_sq = settings.amsgrad ? max_exp_avg_sq : nullptr;
  loop.bf16_copy = bf16_copy;
  loop.n = n;
  loop.amsgrad = settings.amsgrad;
  loop.decay = static_cast<float>(1.0 - lr * weight_decay);
  loop.step_size = static_cast<float>(lr / bias_correction1);
  loop.bias_correction2_sqrt = static_cast<float>(std::sqrt(bias_correction2));
  loop.one_minus_beta1 = static_cast<float>(1.0 - settings.beta1);
  loop.beta2 = static_cast<float>(settings.beta2);
  loop.one_minus_beta2 = static_cast<float>(1.0 - settings.beta2);
  loop.eps = static_cast<float>(settings.eps);
  loop.grad_scale = grad_scale;
  adamw_update(loop);
}

}  // namespace optimizers_basic
