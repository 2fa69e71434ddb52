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
//   // cross-attention (PB_ATTENTION_CAP_CROSS, interface 1.3): encoder output [B, Tk, C]
//   runtime::AttentionHandle::CrossMemory m = attn.cross_memory_create(memory, &mask, true);
//   engine::Tensor y_dec = attn.forward_cross(x_dec, m, /*training=*/true);  // [B, Tq, C]
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
#include <optional>
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

  // What a cross-attention layer computed once from an encoder output (its keys and values).
  // Move-only; keeps the plugin object alive like State.
  class CrossMemory {
   public:
    CrossMemory(CrossMemory&& other) noexcept;
    CrossMemory& operator=(CrossMemory&& other) noexcept;
    CrossMemory(const CrossMemory&) = delete;
    CrossMemory& operator=(const CrossMemory&) = delete;
    ~CrossMemory();
    int64_t batch() const { return batch_; }

   private:
    friend class AttentionHandle;
    CrossMemory(std::shared_ptr<const ComponentInstance> owner, void* memory, int64_t batch);
    void reset() noexcept;
    std::shared_ptr<const ComponentInstance> owner_;
    void* memory_ = nullptr;
    int64_t batch_ = 0;
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
  // Shared prefixes (interface 1.4): a new state of source.size() sequences, sequence i a copy
  // of the state's sequence source[i]; `state` is unchanged. nullopt when the layer cannot
  // (an older interface, a NULL state_fork, or PB_STATUS_UNSUPPORTED); throws Error otherwise.
  std::optional<State> fork_state(const State& state, std::span<const int64_t> source) const;

  // Cross-attention (interface 1.3). can_cross(): the layer declares PB_ATTENTION_CAP_CROSS
  // (and has the functions). require_cross() throws Error(kInvalidArgument) naming the kind
  // and its file when it cannot, so a model builder refuses before building anything.
  bool can_cross() const;
  void require_cross() const;
  // memory [B, Tk, C]; key_padding_mask NULL or [B, Tk] with entries 0 (padding) / 1;
  // `training` as in forward (once per memory: e.g. Performer's redraw count). Records
  // autograd when grad mode is on. Throws as require_cross() for a layer without the capability.
  CrossMemory cross_memory_create(const engine::Tensor& memory,
                                  const engine::Tensor* key_padding_mask, bool training) const;
  // x [B, Tq, C] -> [B, Tq, C]: queries from x, keys and values from the memory.
  engine::Tensor forward_cross(const engine::Tensor& x, const CrossMemory& memory,
                               bool training) const;

  // Packed sequences (interface 1.4). can_pack(): the layer declares PB_ATTENTION_CAP_PACKED
  // (and has forward_packed). require_packed() throws Error(kInvalidArgument) naming the kind
  // and its file when it cannot, so a packed run is refused before it starts.
  bool can_pack() const;
  void require_packed() const;
  // x [B, T, C], segment_ids integer [B, T] non-decreasing per row -> [B, T, C], no attention
  // across segments, positions per segment. Throws as require_packed() without the capability.
  engine::Tensor forward_packed(const engine::Tensor& x, const engine::Tensor& segment_ids,
                                bool training) const;

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
