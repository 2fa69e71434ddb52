// OptimizerHandle: a PB_KIND_OPTIMIZER object (adamw, sgd, ...) in plain C++ over engine
// tensors, as the trainer uses it:
//
//   OptimizerHandle opt(registry.create(PB_KIND_OPTIMIZER, "adamw", config.view()), &api);
//   opt.set_shard(rank, world);                   // ZeRO-1 only, before any parameter
//   opt.add_parameters(params);                   // {name, engine::Tensor leaf, options}
//   ... backward, clip ...
//   opt.step(lr);                                 // lr from train/lr_schedule
//   opt.step_scaled(lr, clip_factor);             // clipping folded in (supports_grad_scale())
//   opt.set_bf16_copy(i, copy);                   // bf16 weights written by the update pass
//   for (const auto& s : opt.state()) save(s.name, s.tensor);     // checkpoint
//   opt.restore_state(loaded);                    // resume: overwrite in place, by name
//
// The host side of patchbay/optimizer.h: every plugin failure becomes patchbay::Error carrying
// the plugin's message, prefixed by "optimizer '<name>' (<file>): <operation>"; what the plugin
// hands back is validated (state names non-empty and unique, tensors present). The handle keeps
// the pb_tensor handles of the registered parameters alive until the plugin object is destroyed
// (the contract lets the plugin keep them).
//
// Tensors cross as pb_tensor handles of the engine's ops table, so the api the object was
// created with must carry engine::host_ops_table() (checked at construction).
// Thread safety: one handle is used by one thread at a time.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "engine/tensor.hpp"
#include "patchbay/optimizer.h"
#include "runtime/component_instance.hpp"

namespace patchbay::runtime {

class OptimizerHandle {
 public:
  struct Parameter {
    std::string name;                 // stable model name, "blocks.0.attn.qkv.weight"
    engine::Tensor tensor;            // the leaf the optimizer updates in place
    double weight_decay_scale = 1.0;  // see pb_param_options (train/param_groups fills these)
    double lr_scale = 1.0;
    std::string group = "default";
  };
  struct StateTensor {
    std::string name;       // "exp_avg/<parameter name>", "step/<parameter name>"
    engine::Tensor tensor;  // the optimizer's own tensor (shared storage): overwrite in place
  };

  // `instance` must be a PB_KIND_OPTIMIZER object created with `host`, and host->ops must be the
  // engine's table.
  OptimizerHandle(ComponentInstance instance, const pb_host_api* host);
  ~OptimizerHandle();
  OptimizerHandle(OptimizerHandle&&) = delete;  // parameter handles are tied to the object
  OptimizerHandle& operator=(OptimizerHandle&&) = delete;

  bool supports_sharding() const { return vtable_->set_shard != nullptr; }
  // Before the first parameter. Throws Error(kInvalidArgument) when the optimizer cannot shard
  // and world > 1 (world 1 is always accepted).
  void set_shard(int64_t rank, int64_t world);

  // Registers parameters in order (indices continue across calls).
  void add_parameters(const std::vector<Parameter>& params);
  void add_parameter(const Parameter& param);
  size_t parameter_count() const { return parameter_handles_.size(); }

  // One update with learning rate lr (finite, >= 0).
  void step(double lr);
  // True when the optimizer folds a gradient scale into its update pass (optimizer.h minor 1:
  // pb_optimizer_vtable::step_scaled present and non-NULL).
  bool supports_grad_scale() const;
  // step(lr) with every gradient read times grad_scale (finite, > 0), the gradients left as they
  // are; only when supports_grad_scale() (Error(kInternal) otherwise: the caller scales the
  // gradients itself, train::optimizer_step_scaled does both).
  void step_scaled(double lr, double grad_scale);

  // True when the optimizer writes bf16 copies of the weights in its update pass (optimizer.h
  // minor 2: pb_optimizer_vtable::set_bf16_copy present and non-NULL).
  bool supports_bf16_copies() const;
  // Registers `copy` (contiguous bf16, parameter `index`'s shape) for parameter `index`: every
  // later step that updates the parameter stores its new values rounded to bf16 there; an
  // undefined `copy` removes the registration. Returns
  // false when the optimizer cannot write this parameter's copy (PB_STATUS_UNSUPPORTED: the
  // caller rounds it itself); throws Error for anything else, or without supports_bf16_copies().
  bool set_bf16_copy(size_t index, const engine::Tensor& copy);

  // Every state tensor of this rank, in the optimizer's order.
  std::vector<StateTensor> state() const;
  // Overwrites every state tensor in place from `saved` (by name). Throws Error(kInvalidArgument)
  // naming missing or unexpected entries and shape or dtype mismatches, before writing anything.
  void restore_state(const std::map<std::string, engine::Tensor>& saved);

  const ComponentInstance& instance() const { return instance_; }

 private:
  std::string context(const std::string& operation) const;

  ComponentInstance instance_;
  const pb_optimizer_vtable* vtable_ = nullptr;
  const pb_host_api* host_;
  std::vector<pb_tensor*> parameter_handles_;  // one reference each, released after destroy
};

}  // namespace patchbay::runtime
