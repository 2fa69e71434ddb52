// Lion: state set-up and the element-wise update on the parameters' f32 buffers (see lion.hpp).
#include "lion.hpp"

#include <string>

namespace lion_optimizer {

using patchbay::PluginError;
using patchbay::Tensor;

namespace {

void require_dense_f32(const Tensor& t, const std::string& what) {
  if (t.dtype() != PB_DTYPE_F32 || !t.is_contiguous())
    throw PluginError(PB_STATUS_UNSUPPORTED,
                      "lion updates contiguous f32 CPU tensors only; " + what + " is not");
}

}  // namespace

Lion::Lion(const patchbay::Host& host, const patchbay::ConfigView& config)
    : ops_(host.api()->ops),
      beta1_(config.get_float("beta1")),
      beta2_(config.get_float("beta2")),
      weight_decay_(config.get_float("weight_decay")) {}

void Lion::init_state(const Param& param) {
  require_dense_f32(param.tensor, "parameter '" + param.name + "'");
  exp_avg_of_.resize(param.index + 1, 0);
  exp_avg_of_[param.index] = exp_avg_.size();
  exp_avg_.push_back(add_state("exp_avg/" + param.name, ops_.zeros(param.tensor.shape())));
}

void Lion::update(const Param& param, const Tensor& grad, double lr) {
  require_dense_f32(grad, "the gradient of '" + param.name + "'");
  float* p = param.tensor.data<float>();
  const float* g = grad.data<float>();
  float* m = exp_avg_[exp_avg_of_[param.index]].data<float>();
  const double wd = weight_decay_ * param.options.weight_decay_scale;
  const int64_t n = param.tensor.numel();
  for (int64_t i = 0; i < n; ++i) {
    const double c = beta1_ * m[i] + (1.0 - beta1_) * g[i];
    const double sign = c > 0 ? 1.0 : (c < 0 ? -1.0 : 0.0);
    p[i] = static_cast<float>(p[i] - lr * (sign + wd * p[i]));
    m[i] = static_cast<float>(beta2_ * m[i] + (1.0 - beta2_) * g[i]);
  }
}

}  // namespace lion_optimizer
