// OptimizerHandle (see optimizer_handle.hpp).
#include "runtime/optimizer_handle.hpp"

#include <cmath>
#include <set>
#include <utility>

#include "common/error.hpp"
#include "engine/ops.hpp"
#include "engine/ops_table.hpp"
#include "runtime/host_api.hpp"

namespace patchbay::runtime {

OptimizerHandle::OptimizerHandle(ComponentInstance instance, const pb_host_api* host)
    : instance_(std::move(instance)), host_(host) {
  if (!instance_ || instance_.component()->kind != PB_KIND_OPTIMIZER) {
    throw Error(ErrorKind::kInternal, "OptimizerHandle needs an optimizer instance");
  }
  vtable_ = static_cast<const pb_optimizer_vtable*>(instance_.component()->vtable);
  if (host_ == nullptr || host_->ops != engine::host_ops_table()) {
    throw Error(ErrorKind::kInternal,
                context("the host api must carry the engine's ops table (runtime::set_host_ops("
                        "engine::host_ops_table()) before creating the optimizer)"));
  }
}

OptimizerHandle::~OptimizerHandle() {
  instance_ = ComponentInstance();  // destroy the plugin object first: it may hold the handles
  for (pb_tensor* h : parameter_handles_) engine::host_ops_table()->release(h);
}

std::string OptimizerHandle::context(const std::string& operation) const {
  return "optimizer '" + instance_.name() + "' (" + instance_.file().string() + "): " + operation;
}

void OptimizerHandle::set_shard(int64_t rank, int64_t world) {
  if (world < 1 || rank < 0 || rank >= world) {
    throw Error(ErrorKind::kInvalidArgument,
                context("shard rank " + std::to_string(rank) + " of world " +
                        std::to_string(world) + " (expected 0 <= rank < world)"));
  }
  if (!parameter_handles_.empty()) {
    throw Error(ErrorKind::kInternal, context("set_shard after parameters were registered"));
  }
  if (!supports_sharding()) {
    if (world == 1) return;
    throw Error(ErrorKind::kInvalidArgument,
                context("does not support optimizer-state sharding (set_shard is NULL); use data "
                        "parallelism without ZeRO-1 or another optimizer"));
  }
  throw_if_error(vtable_->set_shard(instance_.get(), rank, world), context("set_shard failed"));
}

void OptimizerHandle::add_parameters(const std::vector<Parameter>& params) {
  for (const Parameter& p : params) add_parameter(p);
}

void OptimizerHandle::add_parameter(const Parameter& param) {
  if (!param.tensor.defined()) {
    throw Error(ErrorKind::kInternal,
                context("parameter '" + param.name + "' is an undefined tensor"));
  }
  pb_tensor* handle = engine::ops_table_wrap(param.tensor);
  const pb_param_options options{sizeof(pb_param_options), param.weight_decay_scale, param.lr_scale,
                                 param.group.c_str()};
  pb_status* status = vtable_->add_parameter(instance_.get(), parameter_handles_.size(),
                                             param.name.c_str(), handle, &options);
  if (status != nullptr) {
    engine::host_ops_table()->release(handle);
    throw_if_error(status, context("add_parameter '" + param.name + "' " +
                                   engine::shape_str(param.tensor.shape()) + " failed"));
  }
  parameter_handles_.push_back(handle);
}

void OptimizerHandle::step(double lr) {
  if (!std::isfinite(lr) || lr < 0) {
    throw Error(ErrorKind::kInvalidArgument,
                context("learning rate " + std::to_string(lr) +
                        " must be finite and >= 0 (check the schedule)"));
  }
  throw_if_error(vtable_->step(instance_.get(), lr), context("step failed"));
}

bool OptimizerHandle::supports_grad_scale() const {
  return PB_HAS_FIELD(vtable_, pb_optimizer_vtable, step_scaled) && vtable_->step_scaled != nullptr;
}

void OptimizerHandle::step_scaled(double lr, double grad_scale) {
  if (!std::isfinite(lr) || lr < 0) {
    throw Error(ErrorKind::kInvalidArgument,
                context("learning rate " + std::to_string(lr) +
                        " must be finite and >= 0 (check the schedule)"));
  }
  if (!std::isfinite(grad_scale) || !(grad_scale > 0)) {
    throw Error(
        ErrorKind::kInvalidArgument,
        context("gradient scale " + std::to_string(grad_scale) + " must be finite and > 0"));
  }
  if (!supports_grad_scale()) {
    throw Error(ErrorKind::kInternal,
                context("step_scaled: the optimizer has no step_scaled (interface 1.0); scale the "
                        "gradients and call step()"));
  }
  throw_if_error(vtable_->step_scaled(instance_.get(), lr, grad_scale),
                 context("step_scaled failed"));
}

bool OptimizerHandle::supports_bf16_copies() const {
  return PB_HAS_FIELD(vtable_, pb_optimizer_vtable, set_bf16_copy) &&
         vtable_->set_bf16_copy != nullptr;
}

bool OptimizerHandle::set_bf16_copy(size_t index, const engine::Tensor& copy) {
  if (!supports_bf16_copies()) {
    throw Error(ErrorKind::kInternal,
                context("set_bf16_copy: the optimizer has no set_bf16_copy (interface < 1.2); "
                        "round the weights on the host"));
  }
  pb_tensor* handle = copy.defined() ? engine::ops_table_wrap(copy) : nullptr;  // NULL: remove
  pb_status* status = vtable_->set_bf16_copy(instance_.get(), index, handle);
  // The optimizer retains its own reference.
  if (handle != nullptr) engine::host_ops_table()->release(handle);
  if (status != nullptr && host_->status_code(status) == PB_STATUS_UNSUPPORTED) {
    host_->status_free(status);
    return false;
  }
  throw_if_error(status, context("set_bf16_copy " + std::to_string(index) + " failed"));
  return true;
}

std::vector<OptimizerHandle::StateTensor> OptimizerHandle::state() const {
  std::vector<StateTensor> out;
  std::set<std::string> seen;
  const size_t count = vtable_->state_count(instance_.get());
  for (size_t i = 0; i < count; ++i) {
    const char* name = nullptr;
    pb_tensor* handle = nullptr;
    throw_if_error(vtable_->state_tensor(instance_.get(), i, &name, &handle),
                   context("state_tensor " + std::to_string(i) + " failed"));
    if (name == nullptr || name[0] == '\0' || handle == nullptr) {
      throw Error(ErrorKind::kPluginRefused,
                  context("state " + std::to_string(i) + " has no name or no tensor"));
    }
    if (!seen.insert(name).second) {
      throw Error(ErrorKind::kPluginRefused,
                  context("state name '" + std::string(name) + "' appears twice"));
    }
    out.push_back(StateTensor{name, engine::ops_table_tensor(handle)});
  }
  return out;
}

void OptimizerHandle::restore_state(const std::map<std::string, engine::Tensor>& saved) {
  std::vector<StateTensor> current = state();
  std::string problems;
  std::set<std::string> names;
  for (const StateTensor& s : current) {
    names.insert(s.name);
    auto it = saved.find(s.name);
    if (it == saved.end()) {
      problems += "\n  missing: " + s.name;
    } else if (it->second.shape() != s.tensor.shape() || it->second.dtype() != s.tensor.dtype()) {
      problems +=
          "\n  " + s.name + ": saved " + it->second.str() + ", optimizer has " + s.tensor.str();
    }
  }
  for (const auto& [name, tensor] : saved) {
    if (names.count(name) == 0) problems += "\n  unexpected: " + name;
  }
  if (!problems.empty()) {
    throw Error(ErrorKind::kInvalidArgument,
                context("the saved optimizer state does not match this optimizer (same component, "
                        "parameters and shard are needed to resume):" +
                        problems));
  }
  for (StateTensor& s : current) engine::copy_(s.tensor, saved.at(s.name));
}

}  // namespace patchbay::runtime
