// FeedForwardHandle: a PB_KIND_FEEDFORWARD object (dense MLP, mixture of experts) in plain C++
// over engine tensors, as model assembly uses it:
//
//   FeedForwardHandle ffn(registry.create(PB_KIND_FEEDFORWARD, "mlp", config.view()), &api);
//   ffn.init(ctx);                                  // pb_layer_context of this block
//   for (const auto& p : ffn.parameters()) ...      // "fc.weight" -> engine::Tensor leaf
//   FeedForwardHandle::Output out = ffn.forward(x, /*training=*/true);   // x [B, T, C]
//
// The host side of the contract in patchbay/feedforward.h: every plugin failure becomes
// patchbay::Error carrying the plugin's message, prefixed by
// "feedforward '<name>' (<file>): <operation>", and what the plugin hands back is validated
// (y [B, T, C] like x, aux_loss a scalar, statistics with names, parameter names unique,
// parameters requiring grad) so a broken plugin is named instead of corrupting a run. A layer
// without PB_FEEDFORWARD_CAP_CAUSAL is refused for a causal context at init().
//
// Tensors cross as pb_tensor handles of the engine's ops table, so the api the object was
// created with must carry engine::host_ops_table() (checked at construction).
// Thread safety: one handle is used by one thread at a time.
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "engine/tensor.hpp"
#include "patchbay/feedforward.h"
#include "runtime/component_instance.hpp"

namespace patchbay::runtime {

class FeedForwardHandle {
 public:
  struct Parameter {
    std::string name;        // the plugin's name, e.g. "fc.weight"
    engine::Tensor tensor;   // the layer's own leaf (shared storage): read and update in place
  };
  struct Stat {
    std::string name;        // e.g. "expert_load"
    std::vector<float> values;
  };
  struct Output {
    engine::Tensor y;         // [B, T, C], x's dtype
    engine::Tensor aux_loss;  // undefined, or one element (already weighted)
    std::vector<Stat> stats;  // copied out of the plugin's arrays
  };

  // `instance` must be a PB_KIND_FEEDFORWARD object created with `host`, and host->ops must be
  // the engine's table.
  FeedForwardHandle(ComponentInstance instance, const pb_host_api* host);

  // Calls the plugin's init once; `ctx.struct_size` is set here. Throws Error(kInvalidArgument)
  // for a causal context when the layer lacks PB_FEEDFORWARD_CAP_CAUSAL.
  void init(const pb_layer_context& ctx);
  // Every parameter, in the plugin's order (after init).
  std::vector<Parameter> parameters() const;
  Output forward(const engine::Tensor& x, bool training);

  uint64_t capabilities() const { return vtable_->capabilities; }
  bool causal() const { return (capabilities() & PB_FEEDFORWARD_CAP_CAUSAL) != 0; }
  const ComponentInstance& instance() const { return instance_; }

 private:
  std::string context(const std::string& operation) const;

  ComponentInstance instance_;
  const pb_feedforward_vtable* vtable_ = nullptr;
  const pb_host_api* host_;
};

}  // namespace patchbay::runtime
