// sgd: stochastic gradient descent, torch.optim.SGD semantics (maximize=False). Per owned
// parameter p with gradient g (the gradient tensor itself is never written):
//   d <- g + wd * p                         L2, coupled (wd = weight_decay * scale)
//   with momentum mu > 0:
//     buf <- d                              on the parameter's first update
//     buf <- mu * buf + (1 - dampening) d   afterwards
//     d   <- d + mu * buf   (nesterov)   or   d <- buf
//   p <- p - lr * d                         lr = step lr * lr_scale
// State per owned parameter, only with momentum > 0: "step/<name>" (i64 scalar, updates done;
// 0 means the buffer is not yet initialised) and "momentum_buffer/<name>". Without momentum SGD
// has no state. Nesterov needs momentum > 0 and dampening 0 (refused otherwise, as torch does).
#ifndef PATCHBAY_PLUGINS_OPTIMIZERS_BASIC_SGD_HPP_
#define PATCHBAY_PLUGINS_OPTIMIZERS_BASIC_SGD_HPP_

#include <deque>

#include "patchbay/optimizer.hpp"

namespace optimizers_basic {

struct SgdSettings {
  double momentum = 0.0;
  double dampening = 0.0;
  bool nesterov = false;
  double weight_decay = 0.0;
};

class Sgd : public patchbay::Optimizer {
 public:
  Sgd(const patchbay::Host&, const patchbay::ConfigView& config);
  explicit Sgd(const SgdSettings& settings);  // throws PluginError(INVALID_ARGUMENT)

  // Clipping folded into the update pass (optimizer.h minor 1).
  static constexpr bool kScalesGradients = true;

  void init_state(const Param& param) override;
  void update(const Param& param, const patchbay::Tensor& grad, double lr) override;
  void update_scaled(const Param& param, const patchbay::Tensor& grad, double lr,
                     float grad_scale) override;

 private:
  // A parameter on a device: the host's optimizer_update (dense_f32.hpp).
  void update_on_device(const Param& param, const patchbay::Tensor& grad, double lr,
                        double weight_decay, float grad_scale);
  struct Buffer {
    patchbay::Tensor step, momentum_buffer;
  };
  SgdSettings settings_;
  std::deque<Buffer> buffers_;    // one per owned parameter when momentum > 0
  std::deque<size_t> buffer_of_;  // parameter index -> position in buffers_
};

// The update above on raw f32 arrays of n elements. `momentum_buffer` may be NULL when
// settings.momentum == 0; `first_update` selects buf <- d. Every gradient element g is read as
// g * grad_scale (an f32 multiply; none when grad_scale is 1): clipping folded into the pass.
void sgd_step(float* param, const float* grad, float* momentum_buffer, int64_t n, bool first_update,
              double lr, double weight_decay, const SgdSettings& settings, float grad_scale = 1.0f);

inline constexpr pb_config_field kSgdFields[] = {
    patchbay::Field::real("momentum", "0.0", "momentum factor mu (0: plain SGD, no state)")
        .range(0.0, 1.0),
    patchbay::Field::real("dampening", "0.0",
                          "scales the gradient added to the momentum buffer by 1 - dampening")
        .range(0.0, 1.0),
    patchbay::Field::boolean("nesterov", "false",
                             "Nesterov momentum (needs momentum > 0 and dampening 0)"),
    patchbay::Field::real(
        "weight_decay", "0.0",
        "L2 penalty added to the gradient (g += wd * p); parameters in the no_decay group "
        "get none")
        .range(0.0, 100.0),
};
inline constexpr pb_component_descriptor kSgd = patchbay::make_optimizer_component<Sgd>(
    "sgd", "1.0.0", "SGD with momentum, dampening and Nesterov (torch.optim.SGD)", kSgdFields);

}  // namespace optimizers_basic

#endif  // PATCHBAY_PLUGINS_OPTIMIZERS_BASIC_SGD_HPP_
