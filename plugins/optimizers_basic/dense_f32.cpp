// Checks and state allocation shared by adamw and sgd (see dense_f32.hpp).
#include "dense_f32.hpp"

namespace optimizers_basic {
namespace {

void require(const patchbay::Tensor& t, const std::string& what, const std::string& name,
             const char* optimizer) {
  const pb_ops_table* ops = t.ops();
  std::string problem;
  if (ops->device_type(t.handle()) != PB_DEVICE_CPU) {
    problem = "is not on the CPU";
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

void require_dense_f32_grad(const patchbay::Optimizer::Param& param, const patchbay::Tensor& grad,
                            const char* optimizer) {
  require(grad, "gradient of", param.name, optimizer);
}

patchbay::Tensor zeros_like(const patchbay::Tensor& param) {
  return patchbay::Ops(param.ops()).zeros(param.shape(), PB_DTYPE_F32);
}

patchbay::Tensor step_counter(const patchbay::Tensor& like) {
  return patchbay::Ops(like.ops()).zeros({}, PB_DTYPE_I64);
}

}  // namespace optimizers_basic
