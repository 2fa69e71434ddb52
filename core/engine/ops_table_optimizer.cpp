// Ops table version 12: optimizer_update through the C ABI (pb_optimizer_update ->
// engine::OptimizerUpdate, pb_tensor handles -> the engine tensors they share storage with).
#include <exception>
#include <string>

#include "common/error.hpp"
#include "engine/ops_optimizer.hpp"
#include "engine/ops_table.hpp"
#include "patchbay/ops.h"

namespace patchbay::engine {

pb_status* ops_table_status(pb_status_code code, const std::string& message);  // ops_table.cpp

namespace {

OptimizerRule rule_of(pb_optimizer_rule rule) {
  switch (rule) {
    case PB_OPTIMIZER_ADAMW:
      return OptimizerRule::kAdamW;
    case PB_OPTIMIZER_SGD:
      return OptimizerRule::kSgd;
    case PB_OPTIMIZER_LION:
      return OptimizerRule::kLion;
  }
  throw Error(ErrorKind::kInvalidArgument, "unknown pb_optimizer_rule " +
                                               std::to_string(static_cast<int>(rule)) +
                                               " (expected PB_OPTIMIZER_ADAMW, _SGD or _LION)");
}

OptimizerUpdate update_of(const pb_optimizer_update& u) {
  if (u.struct_size < sizeof(pb_optimizer_update))
    throw Error(ErrorKind::kInvalidArgument,
                "pb_optimizer_update.struct_size " + std::to_string(u.struct_size) +
                    " is smaller than version 12's " + std::to_string(sizeof(pb_optimizer_update)) +
                    "; zero-initialise it and set struct_size = sizeof(pb_optimizer_update)");
  OptimizerUpdate out;
  out.rule = rule_of(u.rule);
  out.step = u.step;
  out.lr = u.lr;
  out.beta1 = u.beta1;
  out.beta2 = u.beta2;
  out.eps = u.eps;
  out.weight_decay = u.weight_decay;
  out.momentum = u.momentum;
  out.dampening = u.dampening;
  out.nesterov = u.nesterov != 0;
  out.grad_scale = u.grad_scale;
  return out;
}

Tensor tensor_or_undefined(const pb_tensor* t) {
  return t != nullptr ? ops_table_tensor(t) : Tensor();
}

pb_status* optimizer_update_fn(const pb_optimizer_update* update, pb_tensor* param,
                               const pb_tensor* grad, pb_tensor* state0, pb_tensor* state1,
                               pb_tensor* bf16_copy) noexcept {
  try {
    if (update == nullptr)
      throw Error(ErrorKind::kInvalidArgument, "optimizer_update: update must not be NULL");
    Tensor p = tensor_or_undefined(param), s0 = tensor_or_undefined(state0),
           s1 = tensor_or_undefined(state1), copy = tensor_or_undefined(bf16_copy);
    optimizer_update(update_of(*update), p, tensor_or_undefined(grad), s0, s1, copy);
    return nullptr;
  } catch (const Error& e) {
    return ops_table_status(
        e.kind() == ErrorKind::kInternal ? PB_STATUS_INTERNAL : PB_STATUS_INVALID_ARGUMENT,
        std::string("optimizer_update: ") + e.what());
  } catch (const std::exception& e) {
    return ops_table_status(PB_STATUS_INTERNAL, std::string("optimizer_update: ") + e.what());
  }
}

}  // namespace

void fill_optimizer_entries(pb_ops_table& table) { table.optimizer_update = optimizer_update_fn; }

}  // namespace patchbay::engine
