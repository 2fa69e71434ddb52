// Clipping's norm summed during backward (see grad_norm_in_backward.hpp).
#include "train/grad_norm_in_backward.hpp"

#include <cmath>
#include <utility>
#include <vector>

#include "train/grad_clip.hpp"

namespace patchbay::train {

GradNormInBackward::GradNormInBackward(const std::vector<engine::Tensor>& params)
    : params_(&params), sums_(params.size(), 0.0), summed_(params.size(), 0) {
  index_of_.reserve(params.size());
  for (size_t i = 0; i < params.size(); ++i) index_of_.emplace(params[i].impl(), i);
  previous_ = engine::set_leaf_grad_ready_hook(
      [this](const engine::Tensor& leaf) { on_ready(leaf); });
  installed_ = true;
}

GradNormInBackward::~GradNormInBackward() { restore_hook(); }

void GradNormInBackward::restore_hook() {
  if (!installed_) return;
  engine::set_leaf_grad_ready_hook(std::move(previous_));
  installed_ = false;
}

void GradNormInBackward::on_ready(const engine::Tensor& leaf) {
  if (previous_) previous_(leaf);
  const auto found = index_of_.find(leaf.impl());
  if (found == index_of_.end()) return;  // a leaf that is not a trained parameter
  const engine::Tensor g = leaf.grad();
  // Anything but a contiguous f32 CPU gradient is left to finish(), which checks it as
  // global_grad_norm does (and refuses what that refuses).
  if (!g.defined() || g.device().type != engine::DeviceType::kCpu ||
      g.dtype() != engine::DType::kF32 || !g.is_contiguous())
    return;
  const size_t i = found->second;
  sums_[i] = param_grad_square_sum(leaf);
  summed_[i] = 1;
}

size_t GradNormInBackward::summed_in_backward() const {
  size_t count = 0;
  for (char summed : summed_) count += summed != 0;
  return count;
}

double GradNormInBackward::finish() {
  restore_hook();
  double total = 0.0;
  // Device gradients are summed on their device and read once (grad_square_sum), after the
  // host's, which keep their order.
  std::vector<engine::Tensor> on_device;
  for (size_t i = 0; i < sums_.size(); ++i) {
    const engine::Tensor& param = (*params_)[i];
    if (summed_[i]) {
      total += sums_[i];
    } else if (param.grad().defined() && param.grad().device().type != engine::DeviceType::kCpu) {
      on_device.push_back(param);
    } else {
      total += param_grad_square_sum(param);
    }
  }
  if (!on_device.empty()) total += grad_square_sum(on_device);
  return std::sqrt(total);
}

}  // namespace patchbay::train
