// The "lion" optimizer (Chen et al. 2023, "Symbolic Discovery of Optimization Algorithms").
// Per owned parameter p with gradient g, lr = step lr * lr_scale (applied by the SDK adapter
// before update()), wd = weight_decay * weight_decay_scale:
//   c <- beta1 m + (1 - beta1) g             the update direction's interpolation
//   p <- p - lr (sign(c) + wd p)             decoupled weight decay (p before the update)
//   m <- beta2 m + (1 - beta2) g             the one state tensor, "exp_avg/<name>"
// sign(0) = 0. Parameters and gradients must be contiguous f32 CPU tensors (refused when
// registered otherwise, naming the parameter).
#pragma once

#include <deque>
#include <patchbay/optimizer.hpp>

namespace lion_optimizer {

class Lion : public patchbay::Optimizer {
 public:
  Lion(const patchbay::Host& host, const patchbay::ConfigView& config);

  void init_state(const Param& param) override;
  void update(const Param& param, const patchbay::Tensor& grad, double lr) override;

 private:
  patchbay::Ops ops_;
  double beta1_, beta2_, weight_decay_;
  std::deque<patchbay::Tensor> exp_avg_;  // indexed by exp_avg_of_[param.index]
  std::deque<size_t> exp_avg_of_;
};

inline constexpr pb_config_field kLionFields[] = {
    patchbay::Field::real("beta1", "0.9", "interpolation of the update direction").range(0.0, 1.0),
    patchbay::Field::real("beta2", "0.99", "decay of the momentum state").range(0.0, 1.0),
    patchbay::Field::real("weight_decay", "0.0", "decoupled weight decay").range(0.0, 100.0),
};

inline constexpr pb_component_descriptor kLion = patchbay::make_optimizer_component<Lion>(
    "lion", "1.0.0", "Lion: sign of an interpolated momentum, decoupled weight decay", kLionFields);

}  // namespace lion_optimizer
