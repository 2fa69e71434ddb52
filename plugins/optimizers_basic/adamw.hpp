// adamw: Adam with decoupled weight decay, torch.optim.AdamW semantics (maximize=False), with
// torch's amsgrad variant as an option. Per owned parameter p with gradient g, at its own step t = 1, 2, ...:
//   p <- p * (1 - lr * wd)                 lr = step lr * lr_scale, wd = weight_decay * scale
//   m <- m + (1 - beta1) (g - m)           (= beta1 m + (1 - beta1) g, torch's lerp)
//   v <- beta2 v + (1 - beta2) g^2
//   amsgrad:  vmax <- max(vmax, v), and vmax replaces v below
//   p <- p - lr / (1 - beta1^t) * m / (sqrt(v) / sqrt(1 - beta2^t) + eps)
// State per owned parameter: "step/<name>" (i64 scalar), "exp_avg/<name>" (m),
// "exp_avg_sq/<name>" (v), and "max_exp_avg_sq/<name>" (vmax) with amsgrad; all zeros before
// the first step. A parameter without a gradient is
// skipped and its t does not advance (as torch). One fused OpenMP loop per parameter over
// contiguous f32 CPU data (the global-norm clip factor folded in: step_scaled); other
// parameters are refused when registered.
#ifndef PATCHBAY_PLUGINS_OPTIMIZERS_BASIC_ADAMW_HPP_
#define PATCHBAY_PLUGINS_OPTIMIZERS_BASIC_ADAMW_HPP_

#include <deque>

#include "patchbay/optimizer.hpp"

namespace optimizers_basic {

struct AdamWSettings {
  double beta1 = 0.9;          // [0, 1)
  double beta2 = 0.999;        // [0, 1)
  double eps = 1e-8;           // >= 0
  double weight_decay = 0.01;  // >= 0, times each parameter's weight_decay_scale
  bool amsgrad = false;        // keep the running maximum of v (Reddi et al. 2018)
};

class AdamW : public patchbay::Optimizer {
 public:
  AdamW(const patchbay::Host&, const patchbay::ConfigView& config);
  explicit AdamW(const AdamWSettings& settings);  // throws PluginError(INVALID_ARGUMENT)

  // Clipping folded into the update pass (optimizer.h minor 1).
  static constexpr bool kScalesGradients = true;
  static constexpr bool kWritesBf16Copies = true;  // the fused loop stores the rounded update

  void init_state(const Param& param) override;
  void update(const Param& param, const patchbay::Tensor& grad, double lr) override;
  void update_scaled(const Param& param, const patchbay::Tensor& grad, double lr,
                     float grad_scale) override;

 private:
  struct Moments {  // handles sharing storage with the registered state
    patchbay::Tensor step, exp_avg, exp_avg_sq, max_exp_avg_sq;  // the last with amsgrad only
  };
  AdamWSettings settings_;
  std::deque<Moments> moments_;   // one per owned parameter, in index order
  std::deque<size_t> moment_of_;  // parameter index -> position in moments_ (owned only)
};

// The update above on raw f32 arrays of n elements, step t >= 1 (the reference of the fused
// loop is the formula; tests check both against hand-computed values). max_exp_avg_sq is
// used (and must be non-null) when settings.amsgrad. Every gradient element g is read as
// g * grad_scale (an f32 multiply; none when grad_scale is 1): clipping folded into the pass.
// A non-null bf16_copy [n] receives every new value rounded to bf16 in the same pass.
void adamw_step(float* param, const float* grad, float* exp_avg, float* exp_avg_sq, int64_t n,
                int64_t t, double lr, double weight_decay, const AdamWSettings& settings,
                float* max_exp_avg_sq = nullptr, float grad_scale = 1.0f,
                uint16_t* bf16_copy = nullptr);

inline constexpr pb_config_field kAdamWFields[] = {
    patchbay::Field::real("beta1", "0.9", "decay of the first-moment average, in [0, 1)")
        .range(0.0, 1.0),
    patchbay::Field::real("beta2", "0.999", "decay of the second-moment average, in [0, 1)")
        .range(0.0, 1.0),
    patchbay::Field::real("eps", "1e-8", "added to sqrt(v_hat) in the denominator").range(0.0, 1.0),
    patchbay::Field::real(
        "weight_decay", "0.01",
        "decoupled weight decay (p -= lr * wd * p); parameters in the no_decay group "
        "(biases, norm gains) get none")
        .range(0.0, 100.0),
    patchbay::Field::boolean("amsgrad", "false",
                             "use the running maximum of the second moment (AMSGrad, as torch)"),
};
inline constexpr pb_component_descriptor kAdamW = patchbay::make_optimizer_component<AdamW>(
    "adamw", "1.0.0", "Adam with decoupled weight decay (torch.optim.AdamW)", kAdamWFields);

}  // namespace optimizers_basic

#endif  // PATCHBAY_PLUGINS_OPTIMIZERS_BASIC_ADAMW_HPP_
