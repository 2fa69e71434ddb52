// sgd: settings checks, state set-up and the fused update loop (formula in sgd.hpp).
#include "sgd.hpp"

#include <cmath>
#include <string>

#include "dense_f32.hpp"

namespace optimizers_basic {
namespace {

SgdSettings read_settings(const patchbay::ConfigView& config) {
  SgdSettings s;
  s.momentum = config.get_float("momentum");
  s.dampening = config.get_float("dampening");
  s.nesterov = config.get_bool("nesterov");
  s.weight_decay = config.get_float("weight_decay");
  return s;
}

void check_non_negative(double v, const char* key) {
  if (!(v >= 0.0) || !std::isfinite(v)) {
    throw patchbay::PluginError(
        PB_STATUS_INVALID_ARGUMENT,
        std::string("sgd: ") + key + " = " + std::to_string(v) + " must be finite and >= 0");
  }
}

}  // namespace

Sgd::Sgd(const patchbay::Host&, const patchbay::ConfigView& config) : Sgd(read_settings(config)) {}

Sgd::Sgd(const SgdSettings& settings) : settings_(settings) {
  check_non_negative(settings.momentum, "momentum");
  check_non_negative(settings.dampening, "dampening");
  check_non_negative(settings.weight_decay, "weight_decay");
  if (settings.nesterov && (settings.momentum <= 0.0 || settings.dampening != 0.0)) {
    throw patchbay::PluginError(
        PB_STATUS_INVALID_ARGUMENT,
        "sgd: nesterov = true needs momentum > 0 and dampening = 0 (got momentum " +
            std::to_string(settings.momentum) + ", dampening " +
            std::to_string(settings.dampening) +
            "); set momentum (e.g. 0.9) and dampening = 0, or nesterov = false");
  }
}

void Sgd::init_state(const Param& param) {
  require_dense_f32_any_device(param, "sgd");
  if (settings_.momentum == 0.0) return;
  Buffer b;
  b.step = add_state("step/" + param.name, step_counter(param.tensor));
  b.momentum_buffer = add_state("momentum_buffer/" + param.name, zeros_like(param.tensor));
  buffer_of_.resize(param.index + 1, 0);
  buffer_of_[param.index] = buffers_.size();
  buffers_.push_back(std::move(b));
}

void Sgd::update(const Param& param, const patchbay::Tensor& grad, double lr) {
  update_scaled(param, grad, lr, 1.0f);
}

void Sgd::update_scaled(const Param& param, const patchbay::Tensor& grad, double lr,
                        float grad_scale) {
  require_dense_f32_grad(param, grad, "sgd");
  const double weight_decay = settings_.weight_decay * param.options.weight_decay_scale;
  if (on_device(param.tensor)) {
    update_on_device(param, grad, lr, weight_decay, grad_scale);
    return;
  }
  if (settings_.momentum == 0.0) {
    sgd_step(param.tensor.data<float>(), grad.data<float>(), nullptr, param.tensor.numel(), false,
             lr, weight_decay, settings_, grad_scale);
    return;
  }
  Buffer& b = buffers_[buffer_of_[param.index]];
  int64_t* step = b.step.data<int64_t>();
  sgd_step(param.tensor.data<float>(), grad.data<float>(), b.momentum_buffer.data<float>(),
           param.tensor.numel(), *step == 0, lr, weight_decay, settings_, grad_scale);
  *step += 1;
}

// The device path: the host's optimizer_update with SGD's rule (the step counts updates with
// momentum, as on the CPU: step 1 starts the momentum buffer).
void Sgd::update_on_device(const Param& param, const patchbay::Tensor& grad, double lr,
                           double weight_decay, float grad_scale) {
  pb_optimizer_update u{};
  u.struct_size = sizeof u;
  u.rule = PB_OPTIMIZER_SGD;
  u.step = 1;
  u.lr = lr;
  u.weight_decay = weight_decay;
  u.momentum = settings_.momentum;
  u.dampening = settings_.dampening;
  u.nesterov = settings_.nesterov ? 1 : 0;
  u.grad_scale = grad_scale;
  if (settings_.momentum == 0.0) {
    device_update(u, param, grad, patchbay::Tensor(), patchbay::Tensor());
    return;
  }
  Buffer& b = buffers_[buffer_of_[param.index]];
  int64_t* step = b.step.data<int64_t>();
  u.step = *step + 1;
  device_update(u, param, grad, b.momentum_buffer, patchbay::Tensor());
  *step += 1;
}

namespace {

// One pass over param, grad (and the momentum buffer); kScaled reads g * scale (see sgd.hpp).
template <bool kScaled>
void sgd_loop(float* __restrict param, const float* __restrict grad,
              float* __restrict momentum_buffer, int64_t n, bool first_update, double lr,
              double weight_decay, const SgdSettings& settings, float scale) {
  const float wd = static_cast<float>(weight_decay);
  const float neg_lr = static_cast<float>(-lr);
  const float mu = static_cast<float>(settings.momentum);
  const float one_minus_dampening = static_cast<float>(1.0 - settings.dampening);
  const bool use_momentum = settings.momentum != 0.0;
  const bool nesterov = settings.nesterov;
#pragma omp parallel for simd schedule(static) if (n >= kParallelElements)
  for (int64_t i = 0; i < n; ++i) {
    const float g = kScaled ? grad[i] * scale : grad[i];
    float d = weight_decay != 0.0 ? g + wd * param[i] : g;
    if (use_momentum) {
      const float buf = first_update ? d : momentum_buffer[i] * mu + one_minus_dampening * d;
      momentum_buffer[i] = buf;
      d = nesterov ? d + mu * buf : buf;
    }
    param[i] = param[i] + neg_lr * d;
  }
}

}  // namespace

void sgd_step(float* param, const float* grad, float* momentum_buffer, int64_t n, bool first_update,
              double lr, double weight_decay, const SgdSettings& settings, float grad_scale) {
  if (grad_scale != 1.0f) {
    sgd_loop<true>(param, grad, momentum_buffer, n, first_update, lr, weight_decay, settings,
                   grad_scale);
  } else {
    sgd_loop<false>(param, grad, momentum_buffer, n, first_update, lr, weight_decay, settings,
                    grad_scale);
  }
}

}  // namespace optimizers_basic
