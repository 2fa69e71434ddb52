// lion: EvoLved Sign Momentum (Chen et al. 2023, "Symbolic Discovery of Optimization
// Algorithms"), with the semantics of lucidrains/lion-pytorch. Per owned parameter p with
// gradient g (lr = step lr * lr_scale, wd = weight_decay * weight_decay_scale):
//   c <- beta1 m + (1 - beta1) g            the interpolation whose sign is the update
//   p <- p * (1 - lr * wd) - lr * sign(c)   decoupled decay, then the sign step (sign(0) = 0)
//   m <- beta2 m + (1 - beta2) g            the momentum, with its own (slower) beta
// State per owned parameter: "exp_avg/<name>" (m, zeros before the first step). No step count:
// the update does not depend on t. Every element moves by exactly lr (or 0), so Lion wants an
// lr 3-10x smaller and a weight decay 3-10x larger than AdamW (the paper's advice).
#ifndef PATCHBAY_PLUGINS_OPTIMIZERS_BASIC_LION_HPP_
#define PATCHBAY_PLUGINS_OPTIMIZERS_BASIC_LION_HPP_

#include <deque>

#include "patchbay/optimizer.hpp"

namespace optimizers_basic {

struct LionSettings {
  double beta1 = 0.9;         // [0, 1]: weight of the momentum in the update's sign
  double beta2 = 0.99;        // [0, 1): decay of the momentum
  double weight_decay = 0.0;  // >= 0, times each parameter's weight_decay_scale
};

class Lion : public patchbay::Optimizer {
 public:
  Lion(const patchbay::Host&, const patchbay::ConfigView& config);
  explicit Lion(const LionSettings& settings);  // throws PluginError(INVALID_ARGUMENT)

  // Clipping folded into the update pass (optimizer.h minor 1).
  static constexpr bool kScalesGradients = true;

  void init_state(const Param& param) override;
  void update(const Param& param, const patchbay::Tensor& grad, double lr) override;
  void update_scaled(const Param& param, const patchbay::Tensor& grad, double lr,
                     float grad_scale) override;

 private:
  LionSettings settings_;
  std::deque<patchbay::Tensor> exp_avg_;  // one per owned parameter, in index order
  std::deque<size_t> slot_of_;            // parameter index -> position in exp_avg_
};

// The update above on raw f32 arrays of n elements. Every gradient element g is read as
// g * grad_scale (an f32 multiply; none when grad_scale is 1): clipping folded into the pass.
void lion_step(float* param, const float* grad, float* exp_avg, int64_t n, double lr,
               double weight_decay, const LionSettings& settings, float grad_scale = 1.0f);

inline constexpr pb_config_field kLionFields[] = {
    patchbay::Field::real("beta1", "0.9",
                          "weight of the momentum in the interpolation whose sign is the update")
        .range(0.0, 1.0),
    patchbay::Field::real("beta2", "0.99", "decay of the momentum, in [0, 1)").range(0.0, 1.0),
    patchbay::Field::real("weight_decay", "0.0",
                          "decoupled weight decay (p -= lr * wd * p); Lion wants 3-10x AdamW's")
        .range(0.0, 100.0),
};
inline constexpr pb_component_descriptor kLion = patchbay::make_optimizer_component<Lion>(
    "lion", "1.0.0", "Lion: sign of interpolated momentum, decoupled weight decay (Chen et al. 2023)",
    kLionFields);

}  // namespace optimizers_basic

#endif  // PATCHBAY_PLUGINS_OPTIMIZERS_BASIC_LION_HPP_
