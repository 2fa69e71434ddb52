// The CUDA dispatch entry of optimizer_update (engine/ops_optimizer.hpp, ops table version 12):
// the fused update kernels of kernels/cuda/optimizer_reduce.hpp (one pass over parameter,
// gradient, state and the optional bf16 copy), with the scalars the CPU loop makes
// (math::make_*_scalars: double, rounded once to f32). The op has checked the operands.
#include <cstdint>

#include "cuda/cuda_kernel_support.hpp"
#include "engine/dispatch.hpp"
#include "engine/kernel_signatures.hpp"
#include "patchbay/kernels/cuda/optimizer_reduce.hpp"

namespace patchbay::cuda {
namespace {

using engine::OptimizerRule;
using engine::OptimizerUpdate;
using engine::Tensor;
namespace kc = kernels::cuda;
namespace math = kernels::cuda::math;

float* data_or_null(Tensor& t) { return t.defined() ? t.data<float>() : nullptr; }

void optimizer_update_cuda(const OptimizerUpdate& u, Tensor& param, const Tensor& grad,
                           Tensor& state0, Tensor& state1, Tensor& bf16_copy) {
  const int64_t n = param.numel();
  if (n == 0) return;
  auto* copy = bf16_copy.defined() ? static_cast<uint16_t*>(bf16_copy.data_ptr()) : nullptr;
  const OnDeviceOf on(param);
  switch (u.rule) {
    case OptimizerRule::kAdamW:
      check_launch(kc::adamw_step(param.data<float>(), grad.data<float>(), state0.data<float>(),
                                  state1.data<float>(), copy, n,
                                  math::make_adamw_scalars(u.lr, u.beta1, u.beta2, u.eps,
                                                           u.weight_decay, u.step, u.grad_scale),
                                  on.stream),
                   "optimizer_update (adamw)");
      return;
    case OptimizerRule::kSgd:
      check_launch(
          kc::sgd_step(param.data<float>(), grad.data<float>(), data_or_null(state0), copy, n,
                       math::make_sgd_scalars(u.lr, u.momentum, u.dampening, u.nesterov,
                                              u.weight_decay, u.step == 1, u.grad_scale),
                       on.stream),
          "optimizer_update (sgd)");
      return;
    case OptimizerRule::kLion:
      check_launch(
          kc::lion_step(
              param.data<float>(), grad.data<float>(), state0.data<float>(), copy, n,
              math::make_lion_scalars(u.lr, u.beta1, u.beta2, u.weight_decay, u.grad_scale),
              on.stream),
          "optimizer_update (lion)");
      return;
  }
}

}  // namespace

void register_optimizer_kernels() {
  engine::register_kernel<engine::kernel::OptimizerUpdateKernel>(
      "optimizer_update", engine::DeviceType::kCuda, optimizer_update_cuda);
}

}  // namespace patchbay::cuda
