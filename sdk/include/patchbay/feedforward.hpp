// Patchbay SDK, header-only C++ layer for feed-forward layers (PB_KIND_FEEDFORWARD,
// patchbay/feedforward.h): write a plain C++ class, get a pb_component_descriptor.
//
//   class Mlp : public patchbay::FeedForward {
//    public:
//     static constexpr uint64_t kCapabilities = PB_FEEDFORWARD_CAP_CAUSAL;
//     Mlp(const patchbay::Host& host, const patchbay::ConfigView& config);
//     void init(const pb_layer_context& ctx) override {       // allocate + initialise
//       fc_ = register_parameter("fc.weight", ops.randn({ctx.d_ff, ctx.d_model}, gen) * 0.02);
//     }
//     Output forward(const patchbay::Tensor& x, bool training) override {
//       return {x.matmul(fc_, false, true).gelu()...};       // ops only: autograd is free
//     }
//   };
//   inline constexpr pb_config_field kMlpFields[] = {...};   // may be empty: omit it
//   inline constexpr pb_component_descriptor kMlp =
//       patchbay::make_feedforward_component<Mlp>("mlp", "1.0.0", "summary", kMlpFields);
//
// The adapter (detail::FeedForwardAdapter<T>) fills pb_feedforward_vtable: it refuses init()
// twice and forward() before init() (INVALID_ARGUMENT), a context without the 1.0 fields, a
// host without the tensor engine (UNSUPPORTED); it hands out parameter names and borrowed
// tensors from the layer's list; it writes the result struct field by field inside the
// caller's struct_size and keeps the statistics arrays alive until the next forward(). Every
// exception is caught at the boundary: PluginError keeps its code; anything else becomes
// PB_STATUS_INTERNAL with what(). The descriptor is constexpr so that PATCHBAY_PLUGIN can write
// the metadata section at compile time.
#pragma once

#include <cstddef>
#include <cstdint>
#include <deque>
#include <span>
#include <string>
#include <type_traits>
#include <vector>

#include "patchbay/component.hpp"
#include "patchbay/feedforward.h"
#include "patchbay/tensor.hpp"

namespace patchbay {

// Base class of C++ feed-forward layers. Methods may throw (PluginError for a chosen code).
// One object is used by one thread at a time.
class FeedForward {
 public:
  // PB_FEEDFORWARD_CAP_* bits; a derived class shadows this constant.
  static constexpr uint64_t kCapabilities = 0;

  // One named statistic (e.g. "expert_load", one value per expert).
  struct Stat {
    std::string name;
    std::vector<float> values;
  };
  // y [B, T, C]; aux_loss undefined or a scalar (already weighted); stats may be empty.
  struct Output {
    Tensor y;
    Tensor aux_loss;
    std::vector<Stat> stats;
  };
  struct Parameter {
    std::string name;  // "fc.weight": unique within the layer, [A-Za-z0-9_.]+
    Tensor tensor;     // a leaf with requires_grad, owned by the layer
  };

  virtual ~FeedForward() = default;
  // Allocates and initialises the parameters for ctx (register_parameter). Called once.
  // A context the layer cannot serve is PluginError(PB_STATUS_INVALID_ARGUMENT, why).
  virtual void init(const pb_layer_context& ctx) = 0;
  // x [B, T, C] -> Output. `training` enables dropout, router noise, training capacity.
  virtual Output forward(const Tensor& x, bool training) = 0;

  // Registration order. Elements never move (a deque), so the names and handles the adapter
  // hands out stay valid while the layer lives.
  const std::deque<Parameter>& parameters() const { return parameters_; }

 protected:
  // Adds a parameter the layer owns and returns it. Sets requires_grad (the tensor must be a
  // leaf). Names must be unique.
  Tensor& register_parameter(std::string name, Tensor tensor) {
    for (const Parameter& p : parameters_) {
      if (p.name == name) {
        throw PluginError(PB_STATUS_INTERNAL, "parameter '" + name + "' registered twice");
      }
    }
    tensor.requires_grad(true);
    parameters_.push_back(Parameter{std::move(name), std::move(tensor)});
    return parameters_.back().tensor;
  }

 private:
  std::deque<Parameter> parameters_;
};

namespace detail {

// The 1.0 layouts: a reader may touch nothing past them without checking struct_size.
constexpr size_t kFeedForwardContextSize10 = offsetof(pb_layer_context, device_index) + sizeof(int32_t);
constexpr size_t kFeedForwardResultMinSize = offsetof(pb_feedforward_result, y) + sizeof(pb_tensor*);

template <class T>
struct FeedForwardObject {
  FeedForwardObject(const pb_host_api* h, const pb_config_view* config)
      : host(h), impl(Host(h), ConfigView(config)) {}

  const pb_host_api* host;  // borrowed; outlives the object (component.h)
  T impl;
  bool initialised = false;
  std::vector<FeedForward::Stat> stats;          // of the last forward()
  std::vector<pb_feedforward_stat> stat_views;   // point into `stats`
};

template <class T>
struct FeedForwardAdapter {
  using Object = FeedForwardObject<T>;
  static Object* self(void* p) { return static_cast<Object*>(p); }
  static const Object* self(const void* p) { return static_cast<const Object*>(p); }

  static pb_status* create(const pb_host_api* host, const pb_config_view* config,
                           void** out_instance) {
    *out_instance = nullptr;
    return guarded(host, "feedforward create", [&] { *out_instance = new Object(host, config); });
  }
  static void destroy(void* instance) { delete self(instance); }

  static pb_status* init(void* p, const pb_layer_context* ctx) {
    Object* o = self(p);
    return guarded(o->host, "feedforward init", [&] {
      if (o->initialised) throw PluginError(PB_STATUS_INVALID_ARGUMENT, "init() was already called");
      if (ctx == nullptr || ctx->struct_size < kFeedForwardContextSize10) {
        throw PluginError(PB_STATUS_INVALID_ARGUMENT,
                          "pb_layer_context is NULL or smaller than its 1.0 layout");
      }
      if (o->host->ops == nullptr) {
        throw PluginError(PB_STATUS_UNSUPPORTED, "the host has no tensor engine (pb_host_api::ops is NULL)");
      }
      o->impl.init(*ctx);
      o->initialised = true;
    });
  }
  static size_t parameter_count(const void* p) { return self(p)->impl.parameters().size(); }
  static pb_status* parameter(const void* p, size_t index, const char** out_name,
                              pb_tensor** out_tensor) {
    const Object* o = self(p);
    return guarded(o->host, "feedforward parameter", [&] {
      const auto& params = o->impl.parameters();
      if (index >= params.size()) {
        throw PluginError(PB_STATUS_OUT_OF_RANGE, "parameter index " + std::to_string(index) +
                                                      " >= count " + std::to_string(params.size()));
      }
      *out_name = params[index].name.c_str();
      *out_tensor = params[index].tensor.handle();
    });
  }
  static pb_status* forward(void* p, const pb_tensor* x, int32_t training,
                            pb_feedforward_result* result) {
    Object* o = self(p);
    return guarded(o->host, "feedforward forward", [&] {
      if (!o->initialised) throw PluginError(PB_STATUS_INVALID_ARGUMENT, "forward() before init()");
      if (x == nullptr) throw PluginError(PB_STATUS_INVALID_ARGUMENT, "x is NULL");
      if (result == nullptr || result->struct_size < kFeedForwardResultMinSize) {
        throw PluginError(PB_STATUS_INVALID_ARGUMENT,
                          "result is NULL or its struct_size does not cover `y`");
      }
      const pb_ops_table* ops = o->host->ops;
      ops->retain(const_cast<pb_tensor*>(x));  // the Tensor below owns this extra reference
      FeedForward::Output out = o->impl.forward(Tensor(ops, const_cast<pb_tensor*>(x)), training != 0);
      if (!out.y.defined()) throw PluginError(PB_STATUS_INTERNAL, "forward() returned no y");
      o->stats = std::move(out.stats);
      o->stat_views.clear();
      for (const FeedForward::Stat& s : o->stats) {
        o->stat_views.push_back(
            pb_feedforward_stat{sizeof(pb_feedforward_stat), s.name.c_str(), s.values.data(), s.values.size()});
      }
      // Only fields inside the caller's struct_size are written (an older host's layout).
      result->y = out.y.release();
      if (PB_HAS_FIELD(result, pb_feedforward_result, aux_loss)) {
        result->aux_loss = out.aux_loss.defined() ? out.aux_loss.release() : nullptr;
      }
      if (PB_HAS_FIELD(result, pb_feedforward_result, stat_count)) {
        result->stats = o->stat_views.empty() ? nullptr : o->stat_views.data();
        result->stat_count = o->stat_views.size();
      }
    });
  }

  static constexpr pb_feedforward_vtable kVtable = {sizeof(pb_feedforward_vtable), T::kCapabilities,
                                                    &init, &parameter_count, &parameter, &forward};
};

}  // namespace detail

// The component descriptor of feed-forward class T (derived from patchbay::FeedForward and
// constructible from (const Host&, const ConfigView&)). `fields` must have static storage
// (a namespace-scope constexpr array); the strings must be literals.
template <class T>
constexpr pb_component_descriptor make_feedforward_component(const char* name, const char* version,
                                                             const char* summary,
                                                             std::span<const pb_config_field> fields = {}) {
  static_assert(std::is_base_of_v<FeedForward, T>, "T must derive from patchbay::FeedForward");
  static_assert(std::is_constructible_v<T, const Host&, const ConfigView&>,
                "T needs a constructor T(const patchbay::Host&, const patchbay::ConfigView&)");
  return pb_component_descriptor{sizeof(pb_component_descriptor),
                                 PB_KIND_FEEDFORWARD,
                                 PB_FEEDFORWARD_INTERFACE_MAJOR,
                                 PB_FEEDFORWARD_INTERFACE_MINOR,
                                 name,
                                 version,
                                 summary,
                                 fields.empty() ? nullptr : fields.data(),
                                 fields.size(),
                                 &detail::FeedForwardAdapter<T>::create,
                                 &detail::FeedForwardAdapter<T>::destroy,
                                 &detail::FeedForwardAdapter<T>::kVtable};
}

// ops->bias_activation (pb_ops_table version 7) as Tensor functions: act(x + bias) in one
// fused pass each way, activation PB_UNARY_GELU_TANH or PB_UNARY_RELU (patchbay/ops.h).
// has_bias_activation tells whether the host has it; a layer falls back to composing
// `x + bias` and the activation on an older host.
inline bool has_bias_activation(const pb_ops_table* ops) {
  return PB_HAS_FIELD(ops, pb_ops_table, bias_activation) && ops->bias_activation != nullptr;
}

inline Tensor bias_activation(const Tensor& x, const Tensor& bias, pb_unary_op activation) {
  const pb_ops_table* ops = x.ops();
  if (!has_bias_activation(ops))
    throw PluginError(PB_STATUS_UNSUPPORTED,
                      "this host's ops table (version " + std::to_string(ops->version) +
                          ") has no bias_activation (version 7); upgrade Patchbay or compose x + bias "
                          "and the activation");
  pb_tensor* out = nullptr;
  check_ops_status(ops, ops->bias_activation(x.handle(), bias.handle(), activation, &out), "bias_activation");
  return Tensor(ops, out);
}

}  // namespace patchbay
