// optimizer_update (engine/ops_optimizer.hpp): operand checks, then the device's kernel. The
// CPU kernel is one OpenMP loop over the shared per-element rules of
// kernels/cuda/math/optimizer_update.hpp (the CUDA kernels run the same functions), with the
// scalars made by its make_*_scalars (double, rounded once to f32, as the plugins do). This file
// is compiled without floating-point contraction (CMakeLists.txt), so no FMA merges the rules'
// multiply-adds and the loop gives the plugins' bits.
#include "patchbay/kernels/cuda/math/optimizer_update.hpp"

#include <string>

#include "common/error.hpp"
#include "engine/dispatch.hpp"
#include "engine/kernel_signatures.hpp"
#include "engine/ops_optimizer.hpp"

namespace patchbay::engine {
namespace {

using kernel::OptimizerUpdateKernel;
namespace math = kernels::cuda::math;

constexpr int64_t kParallelElements = 1 << 15;

// The new parameter value rounded to bf16 into the copy, when there is one.
inline void store_copy(uint16_t* copy, int64_t i, float value) {
  if (copy != nullptr) copy[i] = f32_to_bf16(value);
}

void optimizer_update_cpu(const OptimizerUpdate& u, Tensor& param, const Tensor& grad,
                          Tensor& state0, Tensor& state1, Tensor& bf16_copy) {
  float* p = param.data<float>();
  const float* g = grad.data<float>();
  float* s0 = state0.defined() ? state0.data<float>() : nullptr;
  float* s1 = state1.defined() ? state1.data<float>() : nullptr;
  uint16_t* copy = bf16_copy.defined() ? static_cast<uint16_t*>(bf16_copy.data_ptr()) : nullptr;
  const int64_t n = param.numel();
  switch (u.rule) {
    case OptimizerRule::kAdamW: {
      const math::AdamWScalars c = math::make_adamw_scalars(u.lr, u.beta1, u.beta2, u.eps,
                                                            u.weight_decay, u.step, u.grad_scale);
#pragma omp parallel for schedule(static) if (n >= kParallelElements)
      for (int64_t i = 0; i < n; ++i)
        store_copy(copy, i, math::adamw_update(p[i], g[i], s0[i], s1[i], c));
      return;
    }
    case OptimizerRule::kSgd: {
      const math::SgdScalars c = math::make_sgd_scalars(u.lr, u.momentum, u.dampening, u.nesterov,
                                                        u.weight_decay, u.step == 1, u.grad_scale);
      float unused = 0.0f;
#pragma omp parallel for schedule(static) firstprivate(unused) if (n >= kParallelElements)
      for (int64_t i = 0; i < n; ++i)
        store_copy(copy, i, math::sgd_update(p[i], g[i], s0 != nullptr ? s0[i] : unused, c));
      return;
    }
    case OptimizerRule::kLion: {
      const math::LionScalars c =
          math::make_lion_scalars(u.lr, u.beta1, u.beta2, u.weight_decay, u.grad_scale);
#pragma omp parallel for schedule(static) if (n >= kParallelElements)
      for (int64_t i = 0; i < n; ++i) store_copy(copy, i, math::lion_update(p[i], g[i], s0[i], c));
      return;
    }
  }
}
PATCHBAY_REGISTER_KERNEL(OptimizerUpdateKernel, "optimizer_update", DeviceType::kCpu,
                         optimizer_update_cpu);

const char* rule_name(OptimizerRule rule) {
  switch (rule) {
    case OptimizerRule::kAdamW:
      return "adamw";
    case OptimizerRule::kSgd:
      return "sgd";
    case OptimizerRule::kLion:
      return "lion";
  }
  return "?";
}

// Refuses `t` unless it is defined, contiguous, of `dtype`, param's shape and device.
void check_operand(const OptimizerUpdate& u, const Tensor& param, const Tensor& t, const char* role,
                   DType dtype) {
  const std::string where = std::string("optimizer_update (") + rule_name(u.rule) + "): ";
  if (!t.defined())
    throw Error(ErrorKind::kInvalidArgument, where + role + " is missing; the rule needs it");
  if (t.dtype() != dtype || !t.is_contiguous() || t.shape() != param.shape() ||
      t.device() != param.device())
    throw Error(ErrorKind::kInvalidArgument,
                where + "expected " + role + " as a contiguous " + dtype_name(dtype) +
                    " tensor of the parameter's shape on its device (" + param.str() + "), found " +
                    t.str());
}

}  // namespace

void optimizer_update(const OptimizerUpdate& update, Tensor& param, const Tensor& grad,
                      Tensor& state0, Tensor& state1, Tensor& bf16_copy) {
  if (!param.defined())
    throw Error(ErrorKind::kInvalidArgument, "optimizer_update: the parameter is missing");
  check_operand(update, param, param, "the parameter", DType::kF32);
  check_operand(update, param, grad, "the gradient", DType::kF32);
  const bool sgd = update.rule == OptimizerRule::kSgd;
  if (!sgd || update.momentum != 0.0)
    check_operand(update, param, state0, sgd ? "the momentum buffer (state0)" : "exp_avg (state0)",
                  DType::kF32);
  if (update.rule == OptimizerRule::kAdamW)
    check_operand(update, param, state1, "exp_avg_sq (state1)", DType::kF32);
  if (bf16_copy.defined()) check_operand(update, param, bf16_copy, "the bf16 copy", DType::kBF16);
  if (update.step < 1)
    throw Error(
        ErrorKind::kInvalidArgument,
        "optimizer_update: step must be 1 or more (1-based), found " + std::to_string(update.step));
  Tensor no_state;
  Tensor& s0 = sgd && update.momentum == 0.0 ? no_state : state0;
  Tensor& s1 = update.rule == OptimizerRule::kAdamW ? state1 : no_state;
  find_kernel<OptimizerUpdateKernel>("optimizer_update", param.device().type)(update, param, grad,
                                                                              s0, s1, bf16_copy);
}

}  // namespace patchbay::engine
