// Device step values and clipping without host reads (device_step.hpp).
#include "train/device_step.hpp"

#include <cmath>

#include "common/error.hpp"
#include "engine/ops.hpp"
#include "train/grad_clip.hpp"

namespace patchbay::train {

bool keeps_step_values_on_device(const TrainableModel& t) {
  if (t.grad_norm || t.after_backward || t.optimizer_step || t.lora) return false;
  if (t.parameter_tensors.empty()) return false;
  const engine::Device device = t.parameter_tensors.front().device();
  if (device.type == engine::DeviceType::kCpu) return false;
  for (const engine::Tensor& p : t.parameter_tensors)
    if (p.device() != device) return false;
  return true;
}

void clip_grads_on_device(const std::vector<engine::Tensor>& params, const engine::Tensor& norm,
                          double max_norm) {
  // ratio = max_norm / (norm + eps); factor = min(1, ratio) = 1 - relu(1 - ratio).
  const engine::Tensor ratio = engine::mul_scalar(
      engine::pow_scalar(engine::add_scalar(norm, kClipEpsilon), -1.0), max_norm);
  const engine::Tensor factor = engine::add_scalar(
      engine::neg(engine::relu(engine::add_scalar(engine::neg(ratio), 1.0))), 1.0);
  for (const engine::Tensor& p : params) {
    engine::Tensor g = p.grad();
    if (!g.defined()) continue;
    engine::copy_(g, engine::mul(g.detach(), factor.to(g.dtype())));
  }
}

engine::Tensor pack_step_values(const engine::Tensor& loss, const engine::Tensor& aux_loss,
                                const engine::Tensor& norm) {
  const engine::Tensor poison =
      engine::mul_scalar(engine::add(engine::add(loss, aux_loss), norm), 0.0);
  return engine::stack({loss, aux_loss, norm, poison}, 0);
}

void PendingStepValues::add(const StepResult& r, int64_t step) {
  const engine::Tensor poison = engine::narrow(r.device_values, 0, 3, 1);
  poison_ = poison_.defined() ? engine::add(poison_, poison) : poison;
  if (first_step_ < 0) first_step_ = step;
}

void PendingStepValues::read_into(StepResult& r) {
  const engine::Tensor both =
      engine::concat({engine::narrow(r.device_values, 0, 0, 3),
                      poison_.defined() ? poison_ : engine::narrow(r.device_values, 0, 3, 1)},
                     0);
  const std::vector<float> values = both.to_vector();  // the one transfer
  r.loss = values[0];
  r.aux_loss = values[1];
  r.grad_norm = values[2];
  r.finite = std::isfinite(values[3]) && std::isfinite(r.loss) && std::isfinite(r.aux_loss) &&
             std::isfinite(r.grad_norm);
  r.values_pending = false;
  poison_ = engine::Tensor();
  first_step_ = -1;
}

}  // namespace patchbay::train
