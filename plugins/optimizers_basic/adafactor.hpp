// adafactor: Adafactor (Shazeer & Stern 2018) with the semantics of Hugging Face's
// transformers.optimization.Adafactor. Per owned parameter p with gradient g, at its own step
// t = 1, 2, ...:
//   rho    = relative_step ? min(warmup_init ? 1e-6 t : 1e-2, 1/sqrt(t)) * lr_scale : lr
//   alpha  = (scale_parameter ? max(eps2, RMS(p)) : 1) * rho          RMS(x) = ||x||_2/sqrt(n)
//   b2     = 1 - t^decay_rate                                          (decay_rate -0.8)
//   u      = g^2 + eps1
//   p with >= 2 dims, seen as [B, R, C] (B = product of the leading dims), factored moments:
//     row[b,r] <- b2 row + (1 - b2) mean_c u[b,r,:]      col[b,c] <- b2 col + (1 - b2) mean_r u[b,:,c]
//     U = g * rsqrt(row[b,r] / mean_r row[b,:]) * rsqrt(col[b,c])
//   otherwise:  v <- b2 v + (1 - b2) u;   U = g * rsqrt(v)
//   U <- U / max(1, RMS(U) / clip_threshold) * alpha                 update clipping
//   beta1 > 0:  m <- beta1 m + (1 - beta1) U;  U = m                   optional first moment
//   p <- p - weight_decay * alpha * p - U
// With relative_step = true (the paper's and Hugging Face's default) the step size is the
// relative one above and the host's learning rate ([train] lr and its schedule) is NOT used;
// set relative_step = false to step with the host's rate times the parameter scale.
// State per owned parameter: "step/<name>" (i64 scalar), "exp_avg_sq_row/<name>" and
// "exp_avg_sq_col/<name>" (factored) or "exp_avg_sq/<name>", and "exp_avg/<name>" when
// beta1 > 0. Reductions run in double, row by row, so results do not depend on the thread count.
#ifndef PATCHBAY_PLUGINS_OPTIMIZERS_BASIC_ADAFACTOR_HPP_
#define PATCHBAY_PLUGINS_OPTIMIZERS_BASIC_ADAFACTOR_HPP_

#include <deque>
#include <vector>

#include "patchbay/optimizer.hpp"

namespace optimizers_basic {

struct AdafactorSettings {
  double beta1 = 0.0;            // [0, 1): 0 = no first moment (HF beta1=None)
  double decay_rate = -0.8;      // < 0: b2 = 1 - t^decay_rate
  double eps1 = 1e-30;           // added to g^2
  double eps2 = 1e-3;            // floor of the parameter scale RMS(p)
  double clip_threshold = 1.0;   // > 0: update RMS above it is scaled down
  bool relative_step = true;     // step size min(1e-2, 1/sqrt(t)) instead of the host's lr
  bool scale_parameter = true;   // step size times max(eps2, RMS(p))
  bool warmup_init = false;      // relative step 1e-6 t instead of 1e-2 (needs relative_step)
  double weight_decay = 0.0;     // >= 0, times weight_decay_scale, scaled by alpha
};

// The shape Adafactor sees: B matrices of R x C (factored), or one vector of n (not factored).
struct AdafactorLayout {
  bool factored = false;
  int64_t batch = 1, rows = 1, cols = 1;
};
AdafactorLayout adafactor_layout(const std::vector<int64_t>& shape);

// One parameter's state arrays (row/col when factored, else sq; exp_avg when beta1 > 0).
struct AdafactorBuffers {
  float* exp_avg_sq_row = nullptr;  // [B, R]
  float* exp_avg_sq_col = nullptr;  // [B, C]
  float* exp_avg_sq = nullptr;      // [n]
  float* exp_avg = nullptr;         // [n]
};

// The update above on raw f32 arrays; t >= 1; lr = host lr * lr_scale (used when
// relative_step is false), lr_scale separately (relative_step true).
// Every gradient element g is read as g * grad_scale (an f32 multiply; none when grad_scale is
// 1): the host's clip factor folded into the passes instead of a pass of its own.
void adafactor_step(float* param, const float* grad, const AdafactorBuffers& buffers,
                    const AdafactorLayout& layout, int64_t t, double lr, double lr_scale,
                    double weight_decay_scale, const AdafactorSettings& settings,
                    float grad_scale = 1.0f);

class Adafactor : public patchbay::Optimizer {
 public:
  Adafactor(const patchbay::Host&, const patchbay::ConfigView& config);
  explicit Adafactor(const AdafactorSettings& settings);  // throws PluginError(INVALID_ARGUMENT)

  // Clipping folded into the update passes (optimizer.h minor 1).
  static constexpr bool kScalesGradients = true;

  void init_state(const Param& param) override;
  void update(const Param& param, const patchbay::Tensor& grad, double lr) override;
  void update_scaled(const Param& param, const patchbay::Tensor& grad, double lr,
                     float grad_scale) override;

 private:
  struct Slot {
    AdafactorLayout layout;
    patchbay::Tensor step, row, col, sq, exp_avg;  // handles sharing the registered state
  };
  AdafactorSettings settings_;
  std::deque<Slot> slots_;      // one per owned parameter, in index order
  std::deque<size_t> slot_of_;  // parameter index -> position in slots_
};

inline constexpr pb_config_field kAdafactorFields[] = {
    patchbay::Field::real("beta1", "0.0", "first-moment decay; 0 = no first moment (memory-saving default)")
        .range(0.0, 1.0),
    patchbay::Field::real("decay_rate", "-0.8", "second-moment decay exponent: beta2_t = 1 - t^decay_rate")
        .range(-10.0, 0.0),
    patchbay::Field::real("eps1", "1e-30", "added to the squared gradient").range(0.0, 1.0),
    patchbay::Field::real("eps2", "1e-3", "floor of the parameter scale RMS(p)").range(0.0, 1.0),
    patchbay::Field::real("clip_threshold", "1.0", "update clipping: RMS of the update is at most this")
        .range(1e-12, 1e12),
    patchbay::Field::boolean("relative_step", "true",
                             "step size min(1e-2, 1/sqrt(t)) (the [train] lr is then not used)"),
    patchbay::Field::boolean("scale_parameter", "true", "multiply the step size by max(eps2, RMS(p))"),
    patchbay::Field::boolean("warmup_init", "false", "relative step 1e-6 * t during warmup (needs relative_step)"),
    patchbay::Field::real("weight_decay", "0.0", "weight decay, scaled by the step size alpha").range(0.0, 100.0),
};
inline constexpr pb_component_descriptor kAdafactor = patchbay::make_optimizer_component<Adafactor>(
    "adafactor", "1.0.0",
    "Adafactor: factored second moments, relative step size, update clipping (Shazeer & Stern 2018)",
    kAdafactorFields);

}  // namespace optimizers_basic

#endif  // PATCHBAY_PLUGINS_OPTIMIZERS_BASIC_ADAFACTOR_HPP_
