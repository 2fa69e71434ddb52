// Patchbay SDK, header-only C++ layer for optimizers (PB_KIND_OPTIMIZER, patchbay/optimizer.h):
// write a plain C++ class, get a pb_component_descriptor.
//
//   class Sgd : public patchbay::Optimizer {
//    public:
//     Sgd(const patchbay::Host& host, const patchbay::ConfigView& config);
//     void init_state(const Param& p) override {           // once per OWNED parameter
//       buffers_.push_back(add_state("momentum_buffer/" + p.name, zeros like p.tensor));
//     }
//     void update(const Param& p, const patchbay::Tensor& grad, double lr) override {
//       ...                                                 // p.tensor in place; lr * lr_scale
//     }
//   };
//   inline constexpr pb_config_field kSgdFields[] = {...};
//   inline constexpr pb_component_descriptor kSgd =
//       patchbay::make_optimizer_component<Sgd>("sgd", "1.0.0", "summary", kSgdFields);
//
// The base class keeps what every optimizer needs: the registered parameters (index, name,
// tensor handle, options), the shard (rank, world) and which parameters it owns, and the named
// state tensors in registration order. Its default step() calls update() for every owned
// parameter whose grad is defined, in index order, with lr * lr_scale; override step() only
// for an optimizer that needs all gradients at once.
//
// Clipping folded into the update (optimizer.h minor 1, pb_optimizer_vtable::step_scaled): a
// class that declares
//     static constexpr bool kScalesGradients = true;
// overrides update_scaled(param, grad, lr, grad_scale), reading every f32 gradient element g
// as g * grad_scale (one f32 multiply, never written back), and usually implements update()
// as update_scaled(..., 1.0f). The adapter fills step_scaled only for such classes; for any
// other class it stays NULL and the host scales the gradients itself before step(). A class
// that overrides step() and sets kScalesGradients overrides step_scaled() to match.
//
// bf16 weight copies written by the update pass (optimizer.h minor 2, set_bf16_copy): a class
// that declares
//     static constexpr bool kWritesBf16Copies = true;
// stores, whenever it updates a parameter whose Param::bf16_copy is defined, every updated
// element rounded by patchbay::bf16_bits_nearest_even() into bf16_copy.data<uint16_t>(), in
// the same loop (the point: no second pass over the weights). The adapter fills set_bf16_copy
// only for such classes, after checking the copy (bf16, the parameter's shape, contiguous);
// for any other class it stays NULL and the host rounds the weights itself.
//
// The adapter (detail::OptimizerAdapter<T>) fills pb_optimizer_vtable and checks what
// optimizer.h promises before calling T: set_shard at most once and before any parameter,
// 0 <= rank < world; parameter indices 0, 1, 2, ... in order; names non-empty and unique;
// options read within their struct_size (NULL: scales 1, group "default") with finite scales
// >= 0; lr finite and >= 0; grad_scale finite and > 0 (also as a float); state names unique
// (checked when registered). Every exception is caught at the boundary: PluginError keeps its code;
// anything else becomes PB_STATUS_INTERNAL with what(). A host without the tensor engine is refused
// (UNSUPPORTED).
#pragma once

#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <deque>
#include <span>
#include <string>
#include <type_traits>
#include <utility>

#include "patchbay/component.hpp"
#include "patchbay/optimizer.h"
#include "patchbay/tensor.hpp"

namespace patchbay {

// The bf16 bits of `f` rounded to nearest, ties to even; a NaN stays a (quiet) NaN. Equal to the
// engine's f32 -> bf16 conversion (to_dtype). Branch-free, so update loops stay vectorised.
inline uint16_t bf16_bits_nearest_even(float f) {
  uint32_t u;
  std::memcpy(&u, &f, sizeof u);
  const uint32_t quiet_nan = (u >> 16) | 0x0040u;
  const uint32_t rounded = (u + 0x7fffu + ((u >> 16) & 1u)) >> 16;
  return static_cast<uint16_t>((u & 0x7fffffffu) > 0x7f800000u ? quiet_nan : rounded);
}

// Base class of C++ optimizers. Methods may throw (PluginError for a chosen code). One object
// is used by one thread at a time.
class Optimizer {
 public:
  struct Options {
    double weight_decay_scale = 1.0;  // multiplies the configured weight decay
    double lr_scale = 1.0;            // multiplies the step's learning rate
    std::string group = "default";
  };
  struct Param {
    size_t index = 0;  // registration index (0, 1, 2, ...)
    std::string name;  // "blocks.0.attn.qkv.weight"
    Tensor tensor;     // the host's parameter (own reference; updated in place)
    Options options;
    bool owned = true;  // index % world == rank
    // Where the update also writes the new values rounded to bf16 (set_bf16_copy, minor 2);
    // undefined unless the host registered one (only for kWritesBf16Copies classes).
    Tensor bf16_copy;
  };
  struct State {
    std::string name;  // "exp_avg/<param name>"
    Tensor tensor;     // owned by the optimizer; the host may overwrite it in place
  };

  virtual ~Optimizer() = default;

  // Creates the state of one OWNED parameter with add_state() (zeros: resume overwrites it).
  // Throw PluginError(PB_STATUS_UNSUPPORTED, ...) for a parameter this optimizer cannot update
  // (dtype, device, layout), naming it.
  virtual void init_state(const Param& param) = 0;
  // Updates one owned parameter in place from its gradient (defined, same shape). `lr` is the
  // step's learning rate times the parameter's lr_scale.
  virtual void update(const Param& param, const Tensor& grad, double lr) = 0;

  // As update(), with every gradient element g read as g * grad_scale (an f32 multiply; the
  // gradient is not written). Called only for classes with kScalesGradients = true (see the
  // top of this file), which must override it.
  virtual void update_scaled(const Param& param, const Tensor& grad, double lr, float grad_scale) {
    (void)grad;
    (void)lr;
    (void)grad_scale;
    throw PluginError(PB_STATUS_INTERNAL, "update_scaled() is not implemented (parameter '" +
                                              param.name +
                                              "'); set kScalesGradients only "
                                              "in a class that overrides it");
  }

  // One optimisation step over every owned parameter with a defined grad, in index order.
  virtual void step(double lr) {
    for_each_update(
        [&](const Param& p, const Tensor& grad) { update(p, grad, lr * p.options.lr_scale); });
  }
  // As step(), with the gradients read times grad_scale (update_scaled()).
  virtual void step_scaled(double lr, float grad_scale) {
    for_each_update([&](const Param& p, const Tensor& grad) {
      update_scaled(p, grad, lr * p.options.lr_scale, grad_scale);
    });
  }

  // ---- what the adapter and derived classes read ----
  int64_t shard_rank() const { return rank_; }
  int64_t shard_world() const { return world_; }
  bool owns(size_t index) const {
    return static_cast<int64_t>(index % static_cast<size_t>(world_)) == rank_;
  }
  // Registration order. Elements never move (deques), so names and handles stay valid.
  const std::deque<Param>& params() const { return params_; }
  const std::deque<State>& states() const { return states_; }

  // Called by the adapter (after its argument checks); not meant to be overridden.
  void set_shard(int64_t rank, int64_t world) {
    rank_ = rank;
    world_ = world;
  }
  // Registers (or, undefined, removes) the bf16 copy of parameter `index` (checked by the adapter).
  void set_bf16_copy(size_t index, Tensor copy) { params_.at(index).bf16_copy = std::move(copy); }
  // A parameter refused by init_state() leaves no trace (neither it nor its partial state).
  void add_param(Param param) {
    param.owned = owns(param.index);
    params_.push_back(std::move(param));
    const size_t states_before = states_.size();
    try {
      if (params_.back().owned) init_state(params_.back());
    } catch (...) {
      states_.resize(states_before);
      params_.pop_back();
      throw;
    }
  }

 protected:
  // Registers a state tensor under a unique name and returns it (a handle sharing storage).
  Tensor add_state(std::string name, Tensor tensor) {
    for (const State& s : states_) {
      if (s.name == name)
        throw PluginError(PB_STATUS_INTERNAL, "state '" + name + "' registered twice");
    }
    states_.push_back(State{std::move(name), std::move(tensor)});
    return states_.back().tensor;
  }

 private:
  // f(param, grad) for every owned parameter with a defined grad (shape checked), index order.
  template <class F>
  void for_each_update(F&& f) {
    for (Param& p : params_) {
      if (!p.owned) continue;
      Tensor grad = p.tensor.grad();
      if (!grad.defined()) continue;
      if (grad.shape() != p.tensor.shape()) {
        throw PluginError(PB_STATUS_INVALID_ARGUMENT,
                          "gradient of '" + p.name + "' has another shape than the parameter");
      }
      f(p, grad);
    }
  }

  std::deque<Param> params_;
  std::deque<State> states_;
  int64_t rank_ = 0;
  int64_t world_ = 1;
};

namespace detail {

constexpr size_t kParamOptionsMinSize = offsetof(pb_param_options, lr_scale) + sizeof(double);

template <class T>
struct OptimizerObject {
  OptimizerObject(const pb_host_api* h, const pb_config_view* config)
      : host(h), impl(Host(h), ConfigView(config)) {}

  const pb_host_api* host;  // borrowed; outlives the object (component.h)
  T impl;
  bool shard_set = false;
};

inline Optimizer::Options read_param_options(const pb_param_options* options,
                                             const std::string& name) {
  Optimizer::Options out;
  if (options == nullptr) return out;
  if (options->struct_size < kParamOptionsMinSize) {
    throw PluginError(PB_STATUS_INVALID_ARGUMENT,
                      "options of '" + name + "': struct_size " +
                          std::to_string(options->struct_size) +
                          " does not cover weight_decay_scale and lr_scale");
  }
  out.weight_decay_scale = options->weight_decay_scale;
  out.lr_scale = options->lr_scale;
  if (PB_HAS_FIELD(options, pb_param_options, group) && options->group != nullptr)
    out.group = options->group;
  auto check = [&](double v, const char* field) {
    if (!std::isfinite(v) || v < 0) {
      throw PluginError(PB_STATUS_INVALID_ARGUMENT, "options of '" + name + "': " + field + " = " +
                                                        std::to_string(v) +
                                                        " must be finite and >= 0");
    }
  };
  check(out.weight_decay_scale, "weight_decay_scale");
  check(out.lr_scale, "lr_scale");
  return out;
}

template <class T>
struct OptimizerAdapter {
  using Object = OptimizerObject<T>;
  static Object* self(void* p) { return static_cast<Object*>(p); }
  static const Object* self(const void* p) { return static_cast<const Object*>(p); }

  static pb_status* create(const pb_host_api* host, const pb_config_view* config,
                           void** out_instance) {
    *out_instance = nullptr;
    return guarded(host, "optimizer create", [&] {
      if (host->ops == nullptr) {
        throw PluginError(PB_STATUS_UNSUPPORTED,
                          "the host has no tensor engine (pb_host_api::ops is NULL)");
      }
      *out_instance = new Object(host, config);
    });
  }
  static void destroy(void* instance) { delete self(instance); }

  static pb_status* set_shard(void* p, int64_t rank, int64_t world_size) {
    Object* o = self(p);
    return guarded(o->host, "optimizer set_shard", [&] {
      if (o->shard_set || !o->impl.params().empty()) {
        throw PluginError(PB_STATUS_INVALID_ARGUMENT,
                          "set_shard must be called once, before the first add_parameter");
      }
      if (world_size < 1 || rank < 0 || rank >= world_size) {
        throw PluginError(PB_STATUS_INVALID_ARGUMENT,
                          "shard rank " + std::to_string(rank) + " of world " +
                              std::to_string(world_size) +
                              " (expected world >= 1, 0 <= rank < world)");
      }
      o->impl.set_shard(rank, world_size);
      o->shard_set = true;
    });
  }

  static pb_status* add_parameter(void* p, size_t index, const char* name, pb_tensor* param,
                                  const pb_param_options* options) {
    Object* o = self(p);
    return guarded(o->host, "optimizer add_parameter", [&] {
      const size_t expected = o->impl.params().size();
      if (index != expected) {
        throw PluginError(PB_STATUS_INVALID_ARGUMENT,
                          "parameter index " + std::to_string(index) + " out of order (expected " +
                              std::to_string(expected) + ": indices are 0, 1, 2, ...)");
      }
      if (name == nullptr || name[0] == '\0') {
        throw PluginError(PB_STATUS_INVALID_ARGUMENT,
                          "parameter " + std::to_string(index) + " has no name");
      }
      if (param == nullptr) {
        throw PluginError(PB_STATUS_INVALID_ARGUMENT,
                          "parameter '" + std::string(name) + "' is NULL");
      }
      for (const Optimizer::Param& q : o->impl.params()) {
        if (q.name == name) {
          throw PluginError(PB_STATUS_INVALID_ARGUMENT, "parameter name '" + std::string(name) +
                                                            "' registered twice (indices " +
                                                            std::to_string(q.index) + " and " +
                                                            std::to_string(index) + ")");
        }
      }
      Optimizer::Param entry;
      entry.index = index;
      entry.name = name;
      entry.options = read_param_options(options, entry.name);
      o->host->ops->retain(param);  // the Param's Tensor owns this reference
      entry.tensor = Tensor(o->host->ops, param);
      o->impl.add_param(std::move(entry));
    });
  }

  static pb_status* step(void* p, double lr) {
    Object* o = self(p);
    return guarded(o->host, "optimizer step", [&] {
      if (!std::isfinite(lr) || lr < 0) {
        throw PluginError(PB_STATUS_INVALID_ARGUMENT,
                          "learning rate " + std::to_string(lr) + " must be finite and >= 0");
      }
      o->impl.step(lr);
    });
  }

  static pb_status* step_scaled(void* p, double lr, double grad_scale) {
    Object* o = self(p);
    return guarded(o->host, "optimizer step_scaled", [&] {
      if (!std::isfinite(lr) || lr < 0) {
        throw PluginError(PB_STATUS_INVALID_ARGUMENT,
                          "learning rate " + std::to_string(lr) + " must be finite and >= 0");
      }
      const float scale = static_cast<float>(grad_scale);
      if (!std::isfinite(grad_scale) || !(grad_scale > 0) || !std::isfinite(scale)) {
        throw PluginError(PB_STATUS_INVALID_ARGUMENT,
                          "grad_scale " + std::to_string(grad_scale) +
                              " must be finite and > 0 (and finite as a float)");
      }
      o->impl.step_scaled(lr, scale);
    });
  }

  // True when T folds the gradient scale into its update (static constexpr bool
  // kScalesGradients = true).
  static constexpr bool kScales = [] {
    if constexpr (requires { T::kScalesGradients; }) {
      return static_cast<bool>(T::kScalesGradients);
    } else {
      return false;
    }
  }();

  static pb_status* set_bf16_copy(void* p, size_t index, pb_tensor* copy) {
    Object* o = self(p);
    return guarded(o->host, "optimizer set_bf16_copy", [&] {
      const auto& params = o->impl.params();
      if (index >= params.size()) {
        throw PluginError(PB_STATUS_INVALID_ARGUMENT,
                          "set_bf16_copy: parameter index " + std::to_string(index) +
                              " is not registered (" + std::to_string(params.size()) +
                              " parameters)");
      }
      if (copy == nullptr) {
        o->impl.set_bf16_copy(index, Tensor());
        return;
      }
      o->host->ops->retain(copy);  // the Param's Tensor owns this reference
      Tensor t(o->host->ops, copy);
      const Optimizer::Param& param = params[index];
      if (t.dtype() != PB_DTYPE_BF16 || t.shape() != param.tensor.shape() || !t.is_contiguous()) {
        throw PluginError(PB_STATUS_INVALID_ARGUMENT,
                          "set_bf16_copy: the copy of '" + param.name +
                              "' must be a contiguous bf16 tensor with the parameter's shape");
      }
      o->impl.set_bf16_copy(index, std::move(t));
    });
  }

  // True when T writes bf16 copies in its update (static constexpr bool kWritesBf16Copies).
  static constexpr bool kCopies = [] {
    if constexpr (requires { T::kWritesBf16Copies; }) {
      return static_cast<bool>(T::kWritesBf16Copies);
    } else {
      return false;
    }
  }();

  static size_t state_count(const void* p) { return self(p)->impl.states().size(); }
  static pb_status* state_tensor(const void* p, size_t index, const char** out_name,
                                 pb_tensor** out_tensor) {
    const Object* o = self(p);
    return guarded(o->host, "optimizer state_tensor", [&] {
      if (out_name == nullptr || out_tensor == nullptr) {
        throw PluginError(PB_STATUS_INVALID_ARGUMENT, "out_name and out_tensor must not be NULL");
      }
      const auto& states = o->impl.states();
      if (index >= states.size()) {
        throw PluginError(PB_STATUS_OUT_OF_RANGE, "state index " + std::to_string(index) +
                                                      " >= count " + std::to_string(states.size()));
      }
      *out_name = states[index].name.c_str();
      *out_tensor = states[index].tensor.handle();
    });
  }

  static constexpr pb_optimizer_vtable kVtable = {sizeof(pb_optimizer_vtable),
                                                  &set_shard,
                                                  &add_parameter,
                                                  &step,
                                                  &state_count,
                                                  &state_tensor,
                                                  kScales ? &step_scaled : nullptr,
                                                  kCopies ? &set_bf16_copy : nullptr};
};

}  // namespace detail

// The component descriptor of optimizer class T (derived from patchbay::Optimizer and
// constructible from (const Host&, const ConfigView&)). `fields` must have static storage (a
// namespace-scope constexpr array); the strings must be literals.
template <class T>
constexpr pb_component_descriptor make_optimizer_component(
    const char* name, const char* version, const char* summary,
    std::span<const pb_config_field> fields = {}) {
  static_assert(std::is_base_of_v<Optimizer, T>, "T must derive from patchbay::Optimizer");
  static_assert(std::is_constructible_v<T, const Host&, const ConfigView&>,
                "T needs a constructor T(const patchbay::Host&, const patchbay::ConfigView&)");
  return pb_component_descriptor{sizeof(pb_component_descriptor),
                                 PB_KIND_OPTIMIZER,
                                 PB_OPTIMIZER_INTERFACE_MAJOR,
                                 PB_OPTIMIZER_INTERFACE_MINOR,
                                 name,
                                 version,
                                 summary,
                                 fields.empty() ? nullptr : fields.data(),
                                 fields.size(),
                                 &detail::OptimizerAdapter<T>::create,
                                 &detail::OptimizerAdapter<T>::destroy,
                                 &detail::OptimizerAdapter<T>::kVtable};
}

}  // namespace patchbay
