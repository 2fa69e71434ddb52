// AttentionHandle: a PB_KIND_ATTENTION plugin object (patchbay/attention.h) in plain C++ over
// engine tensors, for model assembly, training, evaluation and generation.
//
//   runtime::ComponentConfig config(*registry.find(PB_KIND_ATTENTION, "dense").descriptor);
//   runtime::AttentionHandle attn(registry.create(PB_KIND_ATTENTION, "dense", config.view()),
//                                 registry.host());
//   attn.init(ctx);                                     // pb_layer_context: d_model, heads,
//   seed... for (auto& p : attn.parameters()) optimizer.add("blocks.0.attn." + p.name, p.tensor);
//   engine::Tensor y = attn.forward(x, /*training=*/true);   // x [B, T, C], autograd recorded
//   runtime::AttentionHandle::State cache = attn.state_create(B, capacity);
//   engine::Tensor y_new = attn.forward_step(cache, x_new);  // x_new [B, Tn, C], no gradients
//
// Every failing status becomes patchbay::Error (kind from the plugin's status code) whose
// message is "attention '<name>' (<file>): <operation> failed: <plugin message> [CODE]".
// The host's api must carry the engine's ops table (runtime::set_host_ops with
// engine::host_ops_table()), since tensors cross as that table's pb_tensor handles.
// Lifetime: parameters are the layer's own leaves (shared with the plugin object, which stays
// alive while the handle or any State does). Thread safety: one thread at a time per layer.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "engine/tensor.hpp"
#include "patchbay/attention.h"
#include "runtime/component_instance.hpp"

namespace patchbay::runtime {

class AttentionHandle {
 public:
  struct Parameter {
    std::string name;       // the plugin's name, e.g. "qkv.weight"
    engine::Tensor tensor;  // the layer's leaf (requires_grad); read and write it in place
  };

  // A decoding state (KV cache or recurrent state). Move-only; destroyed with the handle
  // object that owns it, which keeps the plugin object alive.
  class State {
   public:
    State(State&& other) noexcept;
    State& operator=(State&& other) noexcept;
    State(const State&) = delete;
    State& operator=(const State&) = delete;
    ~State();
    int64_t length() const;  // positions already in the state
    int64_t capacity() const { return capacity_; }
    int64_t batch() const { return batch_; }

   private:
    friend class AttentionHandle;
    State(std::shared_ptr<const ComponentInstance> owner, void* state, int64_t batch,
          int64_t capacity);
    void reset() noexcept;
    std::shared_ptr<const ComponentInstance> owner_;
    void* state_ = nullptr;
    int64_t batch_ = 0;
    int64_t capacity_ = 0;
  };

  // `instance` must be a PB_KIND_ATTENTION object; `host` the api it was created with.
  AttentionHandle(ComponentInstance instance, const pb_host_api* host);

  // Once, before anything else. Refusals (a context the layer cannot serve: causal without
  // CAP_CAUSAL, rotary without CAP_ROTARY, ...) throw with the plugin's message.
  void init(const pb_layer_context& ctx);
  std::vector<Parameter> parameters() const;
  // x [B, T, C] -> [B, T, C]; records autograd when grad mode is on.
  engine::Tensor forward(const engine::Tensor& x, bool training) const;
  // Throws Error(kInvalidArgument) when the layer has no cache (cache_kind NONE).
  State state_create(int64_t batch, int64_t capacity) const;
  // x [B, Tn, C] continuing the state -> [B, Tn, C]; run without gradients.
  engine::Tensor forward_step(State& state, const engine::Tensor& x) const;
  // Beam search: sequence i of the state takes sequence source[i]'s contents. Returns false
  // (state untouched) when the layer cannot (interface 1.0, a NULL state_reorder, or
  // PB_STATUS_UNSUPPORTED); throws Error for other failures.
  bool reorder_state(State& state, std::span<const int64_t> source) const;

  uint64_t capabilities() const { return vtable_->capabilities; }
  bool has(uint64_t capability) const { return (capabilities() & capability) != 0; }
  pb_attention_cache_kind cache_kind() const { return vtable_->cache_kind; }
  std::string complexity() const {
    return vtable_->complexity != nullptr ? vtable_->complexity : "";
  }
  const ComponentInstance& instance() const { return *instance_; }

 private:
  std::string context(const char* operation) const;
  engine::Tensor take(pb_tensor* handle, const char* operation) const;

  std::shared_ptr<const ComponentInstance> instance_;
  const pb_attention_vtable* vtable_;
  const pb_host_api* host_;
};

}  // namespace patchbay::runtime
