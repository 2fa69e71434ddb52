// Patchbay SDK, header-only C++ layer for attention layers (PB_KIND_ATTENTION,
// patchbay/attention.h): write a C++ class that reads like a PyTorch module, get a
// pb_component_descriptor.
//
//   class MyAttention : public patchbay::Attention {
//    public:
//     static constexpr uint64_t kCapabilities = PB_ATTENTION_CAP_CAUSAL | PB_ATTENTION_CAP_ROTARY;
//     static constexpr pb_attention_cache_kind kCacheKind = PB_ATTENTION_CACHE_KV;
//     static constexpr const char* kComplexity = "time O(T^2 d), memory O(T d)";
//     MyAttention(const patchbay::Host& host, const patchbay::ConfigView& config);
//     void init(const pb_layer_context& ctx) override;       // add_parameter(...) here
//     patchbay::Tensor forward(const patchbay::Tensor& x, bool training) override;
//     // with a cache (kCacheKind != NONE):
//     std::unique_ptr<patchbay::AttentionState> create_state(int64_t batch, int64_t capacity)
//     override; patchbay::Tensor forward_step(patchbay::AttentionState& state, const
//     patchbay::Tensor& x) override;
//     // with PB_ATTENTION_CAP_CROSS in kCapabilities (cross-attention, attention.h 1.3):
//     std::unique_ptr<patchbay::CrossMemory> create_cross_memory(const patchbay::Tensor& memory,
//         const patchbay::KeyPadding& padding, bool training) override;
//     patchbay::Tensor forward_cross(const patchbay::Tensor& x, const patchbay::CrossMemory& m,
//         bool training) override;
//     // with PB_ATTENTION_CAP_PACKED (packed sequences, attention.h 1.5):
//     patchbay::Tensor forward_packed(const patchbay::Tensor& x, const patchbay::Tensor& ids,
//         const patchbay::PackedSegments& segments, bool training) override;
//   };
//   inline constexpr pb_config_field kMyFields[] = {...};    // may be empty: omit it
//   inline constexpr pb_component_descriptor kMyAttention =
//       patchbay::make_attention_component<MyAttention>("mine", "1.0.0", "summary", kMyFields);
//
// The adapter (detail::AttentionAdapter<T>) fills pb_attention_vtable and:
//  - copies the host's pb_layer_context into a full-size one (fields a host of an older minor
//    did not send are zero), and refuses, before T::init runs, what the declared capabilities
//    exclude: a causal context without CAP_CAUSAL, a non-causal one without CAP_NONCAUSAL,
//    rotary without CAP_ROTARY, ALiBi without CAP_ALIBI, and d_model not a positive multiple of
//    n_heads (all PB_STATUS_INVALID_ARGUMENT, naming the field and the value);
//  - hands out the parameters T registered with add_parameter(), names and tensors owned by T;
//  - runs forward_step with gradient recording off, checks x is [B, Tn, C] with B the state's
//    batch, and that the state has room (PB_STATUS_OUT_OF_RANGE otherwise), so T does not;
//  - packed sequences (only when kCapabilities holds CAP_PACKED; forward_packed is NULL
//    otherwise): checks x [B, T, C] and segment_ids [B, T] (integer, non-decreasing per row)
//    and passes them with a PackedSegments (ids and per-segment positions) to forward_packed;
//  - cross-attention (only when kCapabilities holds CAP_CROSS; the entries are NULL otherwise):
//    checks memory [B, Tk, C] and reads the key padding mask into a KeyPadding (entries 0 or
//    1, shape [B, Tk]), and checks x [B, Tq, C] against the memory's batch, so T does not;
//  - catches every exception at the boundary: PluginError keeps its code; anything else
//    becomes PB_STATUS_INTERNAL with what(), std::bad_alloc PB_STATUS_OUT_OF_MEMORY.
// The descriptor is constexpr so that PATCHBAY_PLUGIN can write the metadata at compile time.
#pragma once

#include <cstdint>
#include <cstring>
#include <deque>
#include <memory>
#include <span>
#include <vector>
#include <string>
#include <type_traits>
#include <utility>

#include "patchbay/attention.h"
#include "patchbay/component.hpp"
#include "patchbay/tensor.hpp"

namespace patchbay {

// One decoding state (a KV cache, a recurrent state). The adapter keeps length() and
// capacity() honest: forward_step is only called with Tn <= capacity() - length() new tokens.
class AttentionState {
 public:
  AttentionState(int64_t batch, int64_t capacity) : batch_(batch), capacity_(capacity) {}
  virtual ~AttentionState() = default;
  AttentionState(const AttentionState&) = delete;
  AttentionState& operator=(const AttentionState&) = delete;

  int64_t batch() const { return batch_; }
  int64_t capacity() const { return capacity_; }
  int64_t length() const { return length_; }  // positions already in the state
  // Called by the layer's forward_step once the new positions are stored.
  void advance(int64_t steps) { length_ += steps; }
  // Beam search (attention.h 1.1): sequence i takes what sequence source[i] held, for every i
  // in [0, batch()); the adapter has checked the indices. Override it by re-gathering every
  // batch-major tensor of the state, e.g. `k = reorder_batch(k, source);` (below).
  virtual void reorder(std::span<const int64_t> /*source*/) {
    throw PluginError(PB_STATUS_UNSUPPORTED,
                      "this attention state cannot be reordered between beams (the host re-prefills "
                      "each beam instead)");
  }
  // Shared prefixes (attention.h 1.4): a new state of source.size() sequences, sequence i a copy
  // of this state's sequence source[i] (the adapter has checked the indices and advances the
  // copy to this state's length). Override it by gathering every batch-major tensor of the state
  // into a new one, e.g. `std::make_unique<KvCache>(n, capacity(), reorder_batch(k, source), ...)`.
  virtual std::unique_ptr<AttentionState> fork(std::span<const int64_t> /*source*/) const {
    throw PluginError(PB_STATUS_UNSUPPORTED,
                      "this attention state cannot be forked (the host prefills the shared "
                      "context once per continuation instead)");
  }

 private:
  int64_t batch_;
  int64_t capacity_;
  int64_t length_ = 0;
};

// The key padding mask of a cross-attention memory (attention.h 1.3), read by the adapter:
// valid[b * length + j] is 1 when key j of sequence b may be attended, 0 for padding. `valid`
// is empty when the caller passed no mask (nothing padded). `mask` is the caller's tensor
// (undefined without one), for layers that want it on their device.
struct KeyPadding {
  int64_t batch = 0, length = 0;
  std::vector<uint8_t> valid;
  Tensor mask;
  bool any() const {  // true when at least one key is padding
    for (uint8_t v : valid)
      if (v == 0) return true;
    return false;
  }
  bool attended(int64_t b, int64_t j) const {
    return valid.empty() || valid[static_cast<size_t>(b * length + j)] != 0;
  }
  // Maximal runs [start, end) of attended keys of sequence b, in order (empty: all padding).
  std::vector<std::pair<int64_t, int64_t>> attended_runs(int64_t b) const {
    std::vector<std::pair<int64_t, int64_t>> runs;
    for (int64_t j = 0; j < length; ++j) {
      if (!attended(b, j)) continue;
      if (!runs.empty() && runs.back().second == j)
        runs.back().second = j + 1;
      else
        runs.emplace_back(j, j + 1);
    }
    return runs;
  }
};

// Rows [start, end) of dim 2 of t[b] for each run of KeyPadding::attended_runs(b), joined:
// t [B, heads, Tk, last] -> [1, heads, attended, last] (t[b] itself when the one run is all of
// Tk). `runs` must not be empty (a sequence with every key padded has nothing to gather).
inline Tensor gather_attended_rows(const Tensor& t, int64_t b,
                                   const std::vector<std::pair<int64_t, int64_t>>& runs) {
  const Tensor row = t.slice(0, b, b + 1);
  if (runs.size() == 1 && runs[0].first == 0 && runs[0].second == t.size(2)) return row;
  std::vector<Tensor> parts;
  parts.reserve(runs.size());
  for (const auto& [start, end] : runs) parts.push_back(row.slice(2, start, end));
  return parts.size() == 1 ? parts[0] : Ops(t.ops()).concat(parts, 2);
}

// What a cross-attention layer computed once from a memory [B, Tk, C] (keys and values, a
// linear-attention summary, ...). Created by create_cross_memory, read by forward_cross.
class CrossMemory {
 public:
  CrossMemory(int64_t batch, int64_t length) : batch_(batch), length_(length) {}
  virtual ~CrossMemory() = default;
  CrossMemory(const CrossMemory&) = delete;
  CrossMemory& operator=(const CrossMemory&) = delete;
  int64_t batch() const { return batch_; }
  int64_t length() const { return length_; }  // Tk, padding included

 private:
  int64_t batch_;
  int64_t length_;
};

// Rows of `t` along dim 0 in the order `source` gives: out[i] = t[source[i]] (a new contiguous
// tensor of t's shape when source.size() == t.size(0)). For reorder() of batch-major states
// (KV caches [B, H, T, D], recurrent states [B, H, D, D]).
inline Tensor reorder_batch(const Tensor& t, std::span<const int64_t> source) {
  std::vector<Tensor> rows;
  rows.reserve(source.size());
  for (int64_t s : source) rows.push_back(t.slice(0, s, s + 1));
  return Ops(t.ops()).concat(rows, 0);
}

// Packed sequences as the adapter read them (attention.h 1.5): the segment ids of a [B, T]
// batch, row-major, checked non-decreasing along each row, and each position's place within
// its segment (t minus the first position of its segment) for positional encodings.
struct PackedSegments {
  int64_t batch = 0, length = 0;
  std::vector<int64_t> ids;        // [B * T]
  std::vector<int64_t> positions;  // [B * T], restarting at 0 with each segment

  // Reads and checks ids (integer [batch, length]); throws PluginError naming the problem.
  static PackedSegments read(const Tensor& ids, int64_t batch, int64_t length) {
    const std::vector<int64_t> shape = ids.shape();
    if (shape != std::vector<int64_t>{batch, length} ||
        (ids.dtype() != PB_DTYPE_I32 && ids.dtype() != PB_DTYPE_I64))
      throw PluginError(PB_STATUS_INVALID_ARGUMENT,
                        "segment_ids must be an integer tensor [B, T] = [" + std::to_string(batch) +
                            ", " + std::to_string(length) + "] (x's batch and length)");
    PackedSegments s;
    s.batch = batch;
    s.length = length;
    s.ids.resize(static_cast<size_t>(batch * length));
    s.positions.resize(s.ids.size());
    const Tensor exact = ids.to(PB_DTYPE_I64).contiguous();  // every id exactly, on the host
    check_ops_status(
        exact.ops(),
        exact.ops()->copy_to_host(exact.handle(), s.ids.data(), s.ids.size() * sizeof(int64_t)),
        "segment_ids");
    for (int64_t b = 0; b < batch; ++b) {
      for (int64_t t = 0; t < length; ++t) {
        const size_t i = static_cast<size_t>(b * length + t);
        const bool continues = t > 0 && s.ids[i] == s.ids[i - 1];
        if (t > 0 && s.ids[i] < s.ids[i - 1])
          throw PluginError(PB_STATUS_INVALID_ARGUMENT,
                            "segment_ids must be non-decreasing along each row (each segment "
                            "one contiguous run); row " +
                                std::to_string(b) + " goes from " + std::to_string(s.ids[i - 1]) +
                                " to " + std::to_string(s.ids[i]) + " at position " +
                                std::to_string(t));
        s.positions[i] = continues ? s.positions[i - 1] + 1 : 0;
      }
    }
    return s;
  }
};

// Base class of C++ attention layers. Methods may throw (PluginError for a chosen code).
// One object is used by one thread at a time (attention.h).
class Attention {
 public:
  // Static declarations read by make_attention_component; a derived class shadows them.
  static constexpr uint64_t kCapabilities = 0;  // PB_ATTENTION_CAP_*
  static constexpr pb_attention_cache_kind kCacheKind = PB_ATTENTION_CACHE_NONE;
  static constexpr const char* kComplexity = "";

  struct Parameter {
    std::string name;  // "qkv.weight"; stable: the host keys checkpoints with it
    Tensor tensor;     // leaf with requires_grad, owned by the layer
  };

  virtual ~Attention() = default;
  // Allocates the parameters (add_parameter) for `ctx`; called once, after the constructor.
  // The adapter has already refused contexts the capabilities exclude.
  virtual void init(const pb_layer_context& ctx) = 0;
  // x [B, T, C] -> [B, T, C]; composed of ops so that autograd gives the backward.
  virtual Tensor forward(const Tensor& x, bool training) = 0;
  // Decoding (kCacheKind != NONE). create_state gets batch >= 1, capacity >= 1.
  virtual std::unique_ptr<AttentionState> create_state(int64_t /*batch*/, int64_t /*capacity*/) {
    throw PluginError(PB_STATUS_UNSUPPORTED,
                      "this attention layer has no decoding state (cache_kind NONE)");
  }
  // x [B, Tn, C] continuing the state's positions -> [B, Tn, C]; must store the new positions
  // and call state.advance(Tn). Runs with gradient recording off.
  virtual Tensor forward_step(AttentionState& /*state*/, const Tensor& /*x*/) {
    throw PluginError(PB_STATUS_UNSUPPORTED,
                      "this attention layer has no decoding state (cache_kind NONE)");
  }

  // Cross-attention (kCapabilities holds PB_ATTENTION_CAP_CROSS; attention.h 1.3). memory
  // [B, Tk, C] and padding are checked by the adapter. Records autograd when gradients are on.
  virtual std::unique_ptr<CrossMemory> create_cross_memory(const Tensor& /*memory*/,
                                                           const KeyPadding& /*padding*/,
                                                           bool /*training*/) {
    throw PluginError(PB_STATUS_UNSUPPORTED,
                      "this attention layer cannot serve as cross-attention (no "
                      "PB_ATTENTION_CAP_CROSS)");
  }
  // x [B, Tq, C] (B = memory.batch()) -> [B, Tq, C]: queries from x, keys and values from the
  // memory, padded keys never attended, no causal mask or positions.
  virtual Tensor forward_cross(const Tensor& /*x*/, const CrossMemory& /*memory*/,
                               bool /*training*/) {
    throw PluginError(PB_STATUS_UNSUPPORTED,
                      "this attention layer cannot serve as cross-attention (no "
                      "PB_ATTENTION_CAP_CROSS)");
  }

  // Packed sequences (kCapabilities holds PB_ATTENTION_CAP_PACKED; attention.h 1.5): x
  // [B, T, C] with segment_ids [B, T] (integer, non-decreasing along each row; checked by the
  // adapter, which also hands the ids over as `segments`). No attention across segments and
  // positions restarting at each: every segment's rows equal forward() on it alone.
  virtual Tensor forward_packed(const Tensor& /*x*/, const Tensor& /*segment_ids*/,
                                const PackedSegments& /*segments*/, bool /*training*/) {
    throw PluginError(PB_STATUS_UNSUPPORTED,
                      "this attention layer cannot run packed sequences (no "
                      "PB_ATTENTION_CAP_PACKED)");
  }

  // Parameters in registration order. References stay valid while the layer lives.
  const std::deque<Parameter>& parameters() const { return parameters_; }

 protected:
  // Registers a parameter (sets requires_grad) and returns it. Names must be unique.
  Tensor& add_parameter(std::string name, Tensor tensor) {
    for (const Parameter& p : parameters_)
      if (p.name == name)
        throw PluginError(PB_STATUS_INTERNAL, "parameter '" + name + "' registered twice");
    tensor.requires_grad(true);
    parameters_.push_back(Parameter{std::move(name), std::move(tensor)});
    return parameters_.back().tensor;
  }

 private:
  std::deque<Parameter> parameters_;  // a deque: push_back never moves the names handed out
};

// ops->rotary_embedding (pb_ops_table version 2) as a Tensor function: x [..., T, D] rotated
// for positions position_offset + t, GPT-NeoX "rotate half" convention (patchbay/ops.h).
// Throws PluginError(PB_STATUS_UNSUPPORTED) on a host whose table predates the op.
inline Tensor rotary_embedding(const Tensor& x, int64_t position_offset, double theta) {
  const pb_ops_table* ops = x.ops();
  if (!PB_HAS_FIELD(ops, pb_ops_table, rotary_embedding) || ops->rotary_embedding == nullptr)
    throw PluginError(
        PB_STATUS_UNSUPPORTED,
        "this host's ops table (version " + std::to_string(ops->version) +
            ") has no rotary_embedding (version 2); upgrade Patchbay or use another positional "
            "encoding");
  pb_tensor* out = nullptr;
  check_ops_status(ops, ops->rotary_embedding(x.handle(), position_offset, theta, &out),
                   "rotary_embedding");
  return Tensor(ops, out);
}

// ops->attention_with_options (pb_ops_table version 3) as a Tensor function: the fused
// attention with causal mask, scale, sliding window and ALiBi slopes (patchbay/ops.h
// documents every option). `options` is borrowed; its struct_size is set here when 0.
// Throws PluginError(PB_STATUS_UNSUPPORTED) on a host whose table predates the op.
inline Tensor attention_with_options(const Tensor& q, const Tensor& k, const Tensor& v,
                                     pb_attention_options options) {
  const pb_ops_table* ops = q.ops();
  if (!PB_HAS_FIELD(ops, pb_ops_table, attention_with_options) ||
      ops->attention_with_options == nullptr)
    throw PluginError(
        PB_STATUS_UNSUPPORTED,
        "this host's ops table (version " + std::to_string(ops->version) +
            ") has no attention_with_options (version 3: sliding window, ALiBi); upgrade "
            "Patchbay or turn those options off");
  if (options.struct_size == 0) options.struct_size = sizeof(pb_attention_options);
  pb_tensor* out = nullptr;
  check_ops_status(
      ops, ops->attention_with_options(q.handle(), k.handle(), v.handle(), &options, &out),
      "attention_with_options");
  return Tensor(ops, out);
}

// ops->causal_linear_attention (pb_ops_table version 5) as a Tensor function: q, k [..., T, E],
// v [..., T, M] -> out [..., T, M], out[l] = sum_{j <= l} (q[l] . k[j]) v[j] (the numerator of
// causal linear attention; fp32 accumulation, O(T E M) time, O(T (E + M)) memory).
// Throws PluginError(PB_STATUS_UNSUPPORTED) on a host whose table predates the op.
inline Tensor causal_linear_attention(const Tensor& q, const Tensor& k, const Tensor& v) {
  const pb_ops_table* ops = q.ops();
  if (!PB_HAS_FIELD(ops, pb_ops_table, causal_linear_attention) ||
      ops->causal_linear_attention == nullptr)
    throw PluginError(PB_STATUS_UNSUPPORTED,
                      "this host's ops table (version " + std::to_string(ops->version) +
                          ") has no causal_linear_attention (version 5); upgrade Patchbay");
  pb_tensor* out = nullptr;
  check_ops_status(ops, ops->causal_linear_attention(q.handle(), k.handle(), v.handle(), &out),
                   "causal_linear_attention");
  return Tensor(ops, out);
}

// ops->cumsum as a Tensor function: inclusive cumulative sum along `dim` (from the end when
// `reverse`), differentiable.
inline Tensor cumsum(const Tensor& x, int64_t dim, bool reverse = false) {
  const pb_ops_table* ops = x.ops();
  pb_tensor* out = nullptr;
  check_ops_status(ops, ops->cumsum(x.handle(), dim, reverse ? 1 : 0, &out), "cumsum");
  return Tensor(ops, out);
}

namespace detail {

template <class T>
struct AttentionObject {
  AttentionObject(const pb_host_api* h, const pb_config_view* config)
      : host(h), impl(Host(h), ConfigView(config)) {}
  const pb_host_api* host;
  T impl;
  int64_t d_model = 0;  // from init; forward_step checks x against it
};

// A borrowed pb_tensor* as a Tensor holding its own reference.
inline Tensor borrow(const pb_host_api* host, const pb_tensor* t) {
  if (t == nullptr) throw PluginError(PB_STATUS_INVALID_ARGUMENT, "tensor argument is NULL");
  pb_tensor* handle = const_cast<pb_tensor*>(t);  // the table's retain takes a non-const handle
  host->ops->retain(handle);
  return Tensor(host->ops, handle);
}

inline void refuse_context(const pb_layer_context& ctx, uint64_t capabilities) {
  auto refuse = [](const std::string& why) { throw PluginError(PB_STATUS_INVALID_ARGUMENT, why); };
  if (ctx.causal != 0 && (capabilities & PB_ATTENTION_CAP_CAUSAL) == 0)
    refuse(
        "this attention layer cannot be causal (no PB_ATTENTION_CAP_CAUSAL) and would let tokens "
        "see "
        "the future in a causal language model; choose a causal attention kind");
  if (ctx.causal == 0 && (capabilities & PB_ATTENTION_CAP_NONCAUSAL) == 0)
    refuse(
        "this attention layer is causal only (no PB_ATTENTION_CAP_NONCAUSAL); it cannot serve a "
        "bidirectional model");
  if (ctx.positional == PB_POSITIONAL_ROTARY && (capabilities & PB_ATTENTION_CAP_ROTARY) == 0)
    refuse(
        "positional 'rotary' asked for, but this attention layer does not apply rotary embeddings "
        "(no PB_ATTENTION_CAP_ROTARY); choose another positional encoding");
  if (ctx.positional == PB_POSITIONAL_ALIBI && (capabilities & PB_ATTENTION_CAP_ALIBI) == 0)
    refuse(
        "positional 'alibi' asked for, but this attention layer does not apply ALiBi (no "
        "PB_ATTENTION_CAP_ALIBI); choose another positional encoding");
  if (ctx.d_model <= 0 || ctx.n_heads <= 0 || ctx.d_model % ctx.n_heads != 0)
    refuse("d_model " + std::to_string(ctx.d_model) + " must be a positive multiple of n_heads " +
           std::to_string(ctx.n_heads));
}

template <class T>
struct AttentionAdapter {
  using Object = AttentionObject<T>;
  static Object* self(void* p) { return static_cast<Object*>(p); }
  static const Object* self(const void* p) { return static_cast<const Object*>(p); }

  static pb_status* create(const pb_host_api* host, const pb_config_view* config,
                           void** out_instance) {
    *out_instance = nullptr;
    return guarded(host, "attention create", [&] {
      if (host->ops == nullptr)
        throw PluginError(PB_STATUS_UNSUPPORTED,
                          "this host was built without the tensor engine (ops is NULL)");
      *out_instance = new Object(host, config);
    });
  }
  static void destroy(void* instance) { delete self(instance); }

  static pb_status* init(void* p, const pb_layer_context* ctx) {
    Object* o = self(p);
    return guarded(o->host, "attention init", [&] {
      if (ctx == nullptr) throw PluginError(PB_STATUS_INVALID_ARGUMENT, "layer context is NULL");
      if (!o->impl.parameters().empty())
        throw PluginError(PB_STATUS_INVALID_ARGUMENT, "init called twice on one attention object");
      pb_layer_context full{};
      std::memcpy(&full, ctx, ctx->struct_size < sizeof(full) ? ctx->struct_size : sizeof(full));
      full.struct_size = sizeof(full);
      refuse_context(full, T::kCapabilities);
      o->impl.init(full);
      o->d_model = full.d_model;
    });
  }
  static size_t parameter_count(const void* p) { return self(p)->impl.parameters().size(); }
  static pb_status* parameter(const void* p, size_t index, const char** out_name,
                              pb_tensor** out_tensor) {
    const Object* o = self(p);
    const auto& params = o->impl.parameters();
    if (index >= params.size())
      return Status::error(o->host, PB_STATUS_OUT_OF_RANGE,
                           "parameter index " + std::to_string(index) + " >= count " +
                               std::to_string(params.size()));
    *out_name = params[index].name.c_str();
    *out_tensor = params[index].tensor.handle();
    return nullptr;
  }
  static pb_status* forward(void* p, const pb_tensor* x, int32_t training, pb_tensor** out_y) {
    Object* o = self(p);
    return guarded(o->host, "attention forward", [&] {
      if (o->d_model == 0) throw PluginError(PB_STATUS_INVALID_ARGUMENT, "forward before init");
      Tensor y = o->impl.forward(borrow(o->host, x), training != 0);
      *out_y = y.release();
    });
  }
  static pb_status* state_create(void* p, int64_t batch, int64_t capacity, void** out_state) {
    Object* o = self(p);
    *out_state = nullptr;
    return guarded(o->host, "attention state_create", [&] {
      if (o->d_model == 0)
        throw PluginError(PB_STATUS_INVALID_ARGUMENT, "state_create before init");
      if (batch < 1 || capacity < 1)
        throw PluginError(PB_STATUS_INVALID_ARGUMENT,
                          "state_create needs batch >= 1 and capacity >= 1, found " +
                              std::to_string(batch) + " and " + std::to_string(capacity));
      std::unique_ptr<AttentionState> state = o->impl.create_state(batch, capacity);
      if (!state) throw PluginError(PB_STATUS_INTERNAL, "create_state returned no state");
      *out_state = state.release();
    });
  }
  static void state_destroy(void* /*p*/, void* state) {
    delete static_cast<AttentionState*>(state);
  }
  static pb_status* forward_step(void* p, void* state_ptr, const pb_tensor* x, pb_tensor** out_y) {
    Object* o = self(p);
    return guarded(o->host, "attention forward_step", [&] {
      if (state_ptr == nullptr) throw PluginError(PB_STATUS_INVALID_ARGUMENT, "state is NULL");
      AttentionState& state = *static_cast<AttentionState*>(state_ptr);
      NoGradGuard no_grad(o->host->ops);
      Tensor input = borrow(o->host, x);
      const std::vector<int64_t> shape = input.shape();
      if (shape.size() != 3 || shape[0] != state.batch() || shape[2] != o->d_model)
        throw PluginError(PB_STATUS_INVALID_ARGUMENT,
                          "forward_step expects x [" + std::to_string(state.batch()) + ", Tn, " +
                              std::to_string(o->d_model) +
                              "] (the state's batch, d_model), found " + shape_text(shape));
      if (shape[1] > state.capacity() - state.length())
        throw PluginError(PB_STATUS_OUT_OF_RANGE,
                          "forward_step of " + std::to_string(shape[1]) + " positions after " +
                              std::to_string(state.length()) + " exceeds the state's capacity " +
                              std::to_string(state.capacity()) +
                              "; create the state with a larger capacity");
      const int64_t before = state.length();
      Tensor y = o->impl.forward_step(state, input);
      if (state.length() != before + shape[1])
        throw PluginError(PB_STATUS_INTERNAL, "forward_step did not advance the state by the " +
                                                  std::to_string(shape[1]) + " new positions");
      *out_y = y.release();
    });
  }
  static pb_status* state_reorder(void* p, void* state_ptr, const int64_t* source, int64_t count) {
    Object* o = self(p);
    return guarded(o->host, "attention state_reorder", [&] {
      AttentionState& state = *static_cast<AttentionState*>(state_ptr);
      if (count != state.batch() || (count > 0 && source == nullptr)) {
        throw PluginError(PB_STATUS_INVALID_ARGUMENT, "state_reorder needs one source per sequence: batch " +
                                                          std::to_string(state.batch()) + ", found " +
                                                          std::to_string(count));
      }
      for (int64_t i = 0; i < count; ++i) {
        if (source[i] < 0 || source[i] >= count) {
          throw PluginError(PB_STATUS_OUT_OF_RANGE, "state_reorder: source[" + std::to_string(i) + "] = " +
                                                        std::to_string(source[i]) + " is not a sequence of the state (0.." +
                                                        std::to_string(count - 1) + ")");
        }
      }
      NoGradGuard no_grad(o->host->ops);
      state.reorder(std::span<const int64_t>(source, static_cast<size_t>(count)));
    });
  }
  static pb_status* state_fork(void* p, const void* state_ptr, const int64_t* source,
                               int64_t count, void** out_state) {
    Object* o = self(p);
    return guarded(o->host, "attention state_fork", [&] {
      if (state_ptr == nullptr || out_state == nullptr || count < 1 || source == nullptr)
        throw PluginError(PB_STATUS_INVALID_ARGUMENT,
                          "state_fork needs a state, an out pointer and count >= 1 sources, found "
                          "count " + std::to_string(count));
      const AttentionState& state = *static_cast<const AttentionState*>(state_ptr);
      for (int64_t i = 0; i < count; ++i)
        if (source[i] < 0 || source[i] >= state.batch())
          throw PluginError(PB_STATUS_OUT_OF_RANGE,
                            "state_fork: source[" + std::to_string(i) + "] = " +
                                std::to_string(source[i]) + " is not a sequence of the state (0.." +
                                std::to_string(state.batch() - 1) + ")");
      NoGradGuard no_grad(o->host->ops);
      std::unique_ptr<AttentionState> copy =
          state.fork(std::span<const int64_t>(source, static_cast<size_t>(count)));
      if (!copy || copy->batch() != count || copy->capacity() != state.capacity() ||
          copy->length() > state.length())
        throw PluginError(PB_STATUS_INTERNAL, "fork did not make a state of " +
                                                  std::to_string(count) +
                                                  " sequences with the source's capacity");
      copy->advance(state.length() - copy->length());  // the copy holds the source's positions
      *out_state = copy.release();
    });
  }
  static int64_t state_length(const void* /*p*/, const void* state) {
    return static_cast<const AttentionState*>(state)->length();
  }

  // Reads a key padding mask (NULL, or [batch, length] with entries 0 or 1) into a KeyPadding.
  static KeyPadding read_padding(const Object* o, const pb_tensor* mask, int64_t batch,
                                 int64_t length) {
    KeyPadding padding;
    padding.batch = batch;
    padding.length = length;
    if (mask == nullptr) return padding;
    padding.mask = borrow(o->host, mask);
    const std::vector<int64_t> shape = padding.mask.shape();
    if (shape != std::vector<int64_t>{batch, length})
      throw PluginError(PB_STATUS_INVALID_ARGUMENT,
                        "key_padding_mask must be [B, Tk] = [" + std::to_string(batch) + ", " +
                            std::to_string(length) + "] (the memory's batch and length), found " +
                            shape_text(shape));
    const std::vector<float> values = padding.mask.to_vector();
    padding.valid.resize(values.size());
    for (size_t i = 0; i < values.size(); ++i) {
      if (values[i] != 0.0f && values[i] != 1.0f)
        throw PluginError(PB_STATUS_INVALID_ARGUMENT,
                          "key_padding_mask entries must be 0 (padding) or 1 (attended), found " +
                              std::to_string(values[i]) + " at flat index " + std::to_string(i));
      padding.valid[i] = values[i] != 0.0f ? 1 : 0;
    }
    return padding;
  }
  static pb_status* cross_memory_create(void* p, const pb_tensor* memory, const pb_tensor* mask,
                                        int32_t training, void** out_memory) {
    Object* o = self(p);
    *out_memory = nullptr;
    return guarded(o->host, "attention cross_memory_create", [&] {
      if (o->d_model == 0)
        throw PluginError(PB_STATUS_INVALID_ARGUMENT, "cross_memory_create before init");
      Tensor m = borrow(o->host, memory);
      const std::vector<int64_t> shape = m.shape();
      if (shape.size() != 3 || shape[0] < 1 || shape[1] < 1 || shape[2] != o->d_model)
        throw PluginError(PB_STATUS_INVALID_ARGUMENT,
                          "cross-attention memory must be [B, Tk, " + std::to_string(o->d_model) +
                              "] with B, Tk >= 1 (the encoder's output at this layer's d_model), "
                              "found " +
                              shape_text(shape));
      const KeyPadding padding = read_padding(o, mask, shape[0], shape[1]);
      std::unique_ptr<CrossMemory> made = o->impl.create_cross_memory(m, padding, training != 0);
      if (!made || made->batch() != shape[0] || made->length() != shape[1])
        throw PluginError(PB_STATUS_INTERNAL,
                          "create_cross_memory returned no memory or one of another shape");
      *out_memory = made.release();
    });
  }
  static void cross_memory_destroy(void* /*p*/, void* memory) {
    delete static_cast<CrossMemory*>(memory);
  }
  static pb_status* forward_cross(void* p, const pb_tensor* x, const void* memory_ptr,
                                  int32_t training, pb_tensor** out_y) {
    Object* o = self(p);
    *out_y = nullptr;
    return guarded(o->host, "attention forward_cross", [&] {
      if (memory_ptr == nullptr)
        throw PluginError(PB_STATUS_INVALID_ARGUMENT, "cross-attention memory is NULL");
      const CrossMemory& memory = *static_cast<const CrossMemory*>(memory_ptr);
      Tensor input = borrow(o->host, x);
      const std::vector<int64_t> shape = input.shape();
      if (shape.size() != 3 || shape[0] != memory.batch() || shape[1] < 1 || shape[2] != o->d_model)
        throw PluginError(PB_STATUS_INVALID_ARGUMENT,
                          "forward_cross expects x [" + std::to_string(memory.batch()) + ", Tq, " +
                              std::to_string(o->d_model) +
                              "] (the memory's batch, d_model; Tq >= 1), found " +
                              shape_text(shape));
      Tensor y = o->impl.forward_cross(input, memory, training != 0);
      *out_y = y.release();
    });
  }

  static pb_status* forward_packed(void* p, const pb_tensor* x, const pb_tensor* segment_ids,
                                   int32_t training, pb_tensor** out_y) {
    Object* o = self(p);
    *out_y = nullptr;
    return guarded(o->host, "attention forward_packed", [&] {
      if (o->d_model == 0) throw PluginError(PB_STATUS_INVALID_ARGUMENT, "forward before init");
      if (segment_ids == nullptr)
        throw PluginError(PB_STATUS_INVALID_ARGUMENT, "forward_packed: segment_ids is NULL");
      Tensor input = borrow(o->host, x);
      const std::vector<int64_t> shape = input.shape();
      if (shape.size() != 3 || shape[2] != o->d_model)
        throw PluginError(PB_STATUS_INVALID_ARGUMENT, "forward_packed expects x [B, T, " +
                                                          std::to_string(o->d_model) + "], found " +
                                                          shape_text(shape));
      Tensor ids = borrow(o->host, segment_ids);
      const PackedSegments segments = PackedSegments::read(ids, shape[0], shape[1]);
      Tensor y = o->impl.forward_packed(input, ids, segments, training != 0);
      *out_y = y.release();
    });
  }

  static std::string shape_text(const std::vector<int64_t>& shape) {
    std::string s = "[";
    for (size_t i = 0; i < shape.size(); ++i) s += (i ? ", " : "") + std::to_string(shape[i]);
    return s + "]";
  }

  static constexpr bool kHasCache = T::kCacheKind != PB_ATTENTION_CACHE_NONE;
  static constexpr bool kCross = (T::kCapabilities & PB_ATTENTION_CAP_CROSS) != 0;
  static constexpr bool kPacked = (T::kCapabilities & PB_ATTENTION_CAP_PACKED) != 0;
  static constexpr pb_attention_vtable kVtable = {sizeof(pb_attention_vtable),
                                                  T::kCapabilities,
                                                  T::kCacheKind,
                                                  T::kComplexity,
                                                  &init,
                                                  &parameter_count,
                                                  &parameter,
                                                  &forward,
                                                  kHasCache ? &state_create : nullptr,
                                                  kHasCache ? &state_destroy : nullptr,
                                                  kHasCache ? &forward_step : nullptr,
                                                  kHasCache ? &state_length : nullptr,
                                                  kHasCache ? &state_reorder : nullptr,
                                                  kCross ? &cross_memory_create : nullptr,
                                                  kCross ? &cross_memory_destroy : nullptr,
                                                  kCross ? &forward_cross : nullptr,
                                                  kHasCache ? &state_fork : nullptr,
                                                  kPacked ? &forward_packed : nullptr};
};

}  // namespace detail

// The component descriptor of attention class T (derived from patchbay::Attention and
// constructible from (const Host&, const ConfigView&)). `fields` must have static storage
// (a namespace-scope constexpr array); the strings must be literals.
template <class T>
constexpr pb_component_descriptor make_attention_component(
    const char* name, const char* version, const char* summary,
    std::span<const pb_config_field> fields = {}) {
  static_assert(std::is_base_of_v<Attention, T>, "T must derive from patchbay::Attention");
  static_assert(std::is_constructible_v<T, const Host&, const ConfigView&>,
                "T needs a constructor T(const patchbay::Host&, const patchbay::ConfigView&)");
  static_assert((T::kCapabilities & (PB_ATTENTION_CAP_CAUSAL | PB_ATTENTION_CAP_NONCAUSAL)) != 0,
                "an attention layer must declare PB_ATTENTION_CAP_CAUSAL, "
                "PB_ATTENTION_CAP_NONCAUSAL or both");
  return pb_component_descriptor{sizeof(pb_component_descriptor),
                                 PB_KIND_ATTENTION,
                                 PB_ATTENTION_INTERFACE_MAJOR,
                                 PB_ATTENTION_INTERFACE_MINOR,
                                 name,
                                 version,
                                 summary,
                                 fields.empty() ? nullptr : fields.data(),
                                 fields.size(),
                                 &detail::AttentionAdapter<T>::create,
                                 &detail::AttentionAdapter<T>::destroy,
                                 &detail::AttentionAdapter<T>::kVtable};
}

}  // namespace patchbay
