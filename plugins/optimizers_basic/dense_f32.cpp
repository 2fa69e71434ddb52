// Checks and state allocation shared by adamw and sgd (see dense_f32.hpp).
#include "dense_f32.hpp"

namespace optimizers_basic {
namespace {

bool has_device_updates(const pb_ops_table* ops) {
  return PB_HAS_FIELD(ops, pb_ops_table, optimizer_update) && ops->optimizer_update != nullptr;
}

void require(const patchbay::Tensor& t, const std::string& what, const std::string& name,
             const char* optimizer, bool any_device = false) {
  const pb_ops_table* ops = t.ops();
  std::string problem;
  if (ops->device_type(t.handle()) != PB_DEVICE_CPU && !(any_device && has_device_updates(ops))) {
    problem = any_device ? "is on a device and this host has no optimizer_update (ops table "
                           "version 12)"
                         : "is not on the CPU";
  } else if (t.dtype() != PB_DTYPE_F32) {
    problem = "is not f32 (dtype " + std::to_string(static_cast<int>(t.dtype())) + ")";
  } else if (!t.is_contiguous()) {
    problem = "is not contiguous";
  }
  if (!problem.empty()) {
    throw patchbay::PluginError(
        PB_STATUS_UNSUPPORTED,
        std::string(optimizer) + ": " + what + " '" + name + "' " + problem +
            "; this optimizer updates contiguous f32 CPU tensors only for now "
            "(keep f32 master weights on the CPU)");
  }
}

}  // namespace

void require_dense_f32(const patchbay::Optimizer::Param& param, const char* optimizer) {
  require(param.tensor, "parameter", param.name, optimizer);
}

void require_dense_f32_any_device(const patchbay::Optimizer::Param& param, const char* optimizer) {
  require(param.tensor, "parameter", param.name, optimizer, true);
}

void require_dense_f32_grad(const patchbay::Optimizer::Param& param, const patchbay::Tensor& grad,
                            const char* optimizer) {
  require(grad, "gradient of", param.name, optimizer, on_device(param.tensor));
}

bool on_device(const patchbay::Tensor& t) {
  return t.ops()->device_type(t.handle()) != PB_DEVICE_CPU;
}

void device_update(const pb_optimizer_update& update, const patchbay::Optimizer::Param& param,
                   const patchbay::Tensor& grad, const patchbay::Tensor& state0,
                   const patchbay::Tensor& state1) {
  const pb_ops_table* ops = param.tensor.ops();
  auto handle = [](const patchbay::Tensor& t) { return t.defined() ? t.handle() : nullptr; };
  patchbay::check_ops_status(
      ops,
      ops->optimizer_update(&update, param.tensor.handle(), grad.handle(), handle(state0),
                            handle(state1), handle(param.bf16_copy)),
      "optimizer_update");
}

patchbay::Tensor zeros_like(const patchbay::Tensor& param) {
  patchbay::Tensor zeros = patchbay::Ops(param.ops()).zeros(param.shape(), PB_DTYPE_F32);
  if (!on_device(param)) return zeros;
  const pb_ops_table* ops = param.ops();
  return patchbay::to_device(zeros, ops->device_type(param.handle()),
                             ops->device_index(param.handle()));
}

patchbay::Tensor step_counter(const patchbay::Tensor& like) {
  return patchbay::Ops(like.ops()).zeros({}, PB_DTYPE_I64);
}

}  // namespace optimizers_basic
