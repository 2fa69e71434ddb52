// bf16 weight copies written by the optimizer's update pass (see bf16_weight_copies.hpp).
#include "train/bf16_weight_copies.hpp"

#include "engine/autocast.hpp"
#include "engine/autograd.hpp"
#include "engine/ops.hpp"

namespace patchbay::train {

Bf16WeightCopies::Bf16WeightCopies(runtime::OptimizerHandle& optimizer,
                                   const std::vector<engine::Tensor>& parameters)
    : optimizer_(&optimizer) {
  if (!optimizer.supports_bf16_copies()) return;
  // OptimizerHandle numbers parameters in registration order, which is `parameters`' order.
  for (size_t i = 0; i < parameters.size(); ++i) {
    const engine::Tensor& p = parameters[i];
    if (p.dtype() != engine::DType::kF32 || !p.is_contiguous()) continue;
    engine::Tensor copy = engine::Tensor::empty(p.shape(), engine::DType::kBF16, p.device());
    if (!optimizer.set_bf16_copy(i, copy)) continue;
    indices_.push_back(i);
    parameters_.push_back(p);
    copies_.push_back(copy);
  }
}

void Bf16WeightCopies::pause() {
  if (!registered_) return;
  for (size_t i : indices_) optimizer_->set_bf16_copy(i, engine::Tensor());
  registered_ = false;
  current_ = false;
}

void Bf16WeightCopies::use_in_scope() {
  if (!registered_) {
    for (size_t k = 0; k < indices_.size(); ++k) optimizer_->set_bf16_copy(indices_[k], copies_[k]);
    registered_ = true;
  }
  if (!current_) {
    engine::NoGradGuard no_grad;
    for (size_t i = 0; i < copies_.size(); ++i) engine::copy_(copies_[i], parameters_[i].detach());
    current_ = true;
  }
  for (size_t i = 0; i < copies_.size(); ++i) engine::autocast_use_copy(parameters_[i], copies_[i]);
}

}  // namespace patchbay::train
