// Patchbay SDK conformance kit for feed-forward layers (PB_KIND_FEEDFORWARD): the checks every
// feed-forward plugin, built-in or third-party, must pass. Header-only, test-framework-agnostic:
// the check returns a report whose failures list is empty on success, so a doctest / gtest /
// Catch test asserts on it and prints the messages.
//
//   #include <patchbay/testing/feedforward_conformance.hpp>
//   namespace pt = patchbay::testing;
//   pt::ConfigBuilder config(kMyDescriptor, {{"activation", "relu"}});  // defaults + overrides
//   const pt::FeedForwardConformanceReport report =
//       pt::check_feedforward_conformance(kMyDescriptor, config.view(), host);
//   CHECK_MESSAGE(report.ok(), report.message());
//
// `host` must carry the tensor engine (pb_host_api::ops non-NULL): a Patchbay host provides it.
// The kit drives the layer through its C ABI only (pb_feedforward_vtable), with tiny dims
// (FeedForwardConformanceOptions::context, d_model 8, d_ff 16, f32 parameters) so that the
// finite differences stay fast. What is checked (patchbay/feedforward.h is the contract):
//  descriptor   kind, interface major, vtable struct_size and callbacks;
//  parameters   names non-empty, [A-Za-z0-9_.]+ and unique; tensors non-NULL leaves with
//               requires_grad, of ctx.param_dtype, finite; equal seeds give equal values and
//               another seed other values (model_layer.h);
//  forward      y [B, T, C] of x's dtype, finite; aux_loss NULL or one element; stats with
//               names and values; the same input twice gives the same y; a result struct whose
//               struct_size covers only `y` is either refused or filled without writing past
//               it; training = 1 keeps the shape; x of another width is refused with
//               PB_STATUS_INVALID_ARGUMENT;
//  positions    perturbing one position changes that position's output and no other (set
//               check_position_independence = false for layers whose routing couples tokens,
//               e.g. capacity limits: then only causality is checked, by perturbing the last
//               position of the last sequence);
//  gradients    finite differences (gradcheck.hpp) against backward() for x and every
//               parameter, through y and through aux_loss when there is one, in eval mode.
// ReLU-like kinks: a finite difference straddling a kink disagrees with the derivative. The
// default context draws weights with std 0.5 so pre-activations are O(1) and seldom lie within
// eps of a kink; a kinked layer that fails on one element with another seed has found one.
#pragma once

#include <cmath>
#include <cstddef>
#include <cstdint>
#include <exception>
#include <cstring>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "patchbay/feedforward.h"
#include "patchbay/tensor.hpp"
#include "patchbay/testing/config_builder.hpp"
#include "patchbay/testing/gradcheck.hpp"

namespace patchbay::testing {

// The kit's default layer context: tiny, f32, CPU, causal, seed 1234.
inline pb_layer_context feedforward_test_context() {
  pb_layer_context ctx{};
  ctx.struct_size = sizeof(pb_layer_context);
  ctx.d_model = 8;
  ctx.n_heads = 2;
  ctx.d_ff = 16;
  ctx.max_seq_len = 16;
  ctx.layer_index = 0;
  ctx.n_layers = 2;
  ctx.causal = 1;
  ctx.positional = PB_POSITIONAL_LEARNED;
  ctx.rope_theta = 10000.0;
  ctx.init_std = 0.5;
  ctx.residual_init_std = 0.5;
  ctx.seed = 1234;
  ctx.param_dtype = PB_DTYPE_F32;
  ctx.device_type = PB_DEVICE_CPU;
  ctx.device_index = 0;
  return ctx;
}

struct FeedForwardConformanceOptions {
  pb_layer_context context = feedforward_test_context();
  int64_t batch = 2;
  int64_t seq_len = 3;
  uint64_t input_seed = 7;
  bool check_position_independence = true;
  GradcheckOptions gradcheck{};
};

struct FeedForwardConformanceReport {
  std::vector<std::string> failures;
  bool ok() const { return failures.empty(); }
  std::string message() const {
    std::string out;
    for (const std::string& f : failures) out += (out.empty() ? "" : "\n") + f;
    return out.empty() ? "ok" : out;
  }
};

namespace feedforward_kit_detail {

struct Abort {  // stops the current check; its message is the failure
  std::string message;
};

inline std::string shape_text(const std::vector<int64_t>& s) {
  std::string out = "[";
  for (size_t i = 0; i < s.size(); ++i) out += (i == 0 ? "" : ", ") + std::to_string(s[i]);
  return out + "]";
}

// Reads and frees a status the layer returned (made with host->status_create).
inline std::pair<pb_status_code, std::string> take_status(const pb_host_api* host, pb_status* st) {
  if (st == nullptr) return {PB_STATUS_OK, ""};
  std::pair<pb_status_code, std::string> out{host->status_code(st), host->status_message(st)};
  host->status_free(st);
  return out;
}
inline void expect_ok(const pb_host_api* host, pb_status* st, const std::string& what) {
  auto [code, message] = take_status(host, st);
  if (code != PB_STATUS_OK) throw Abort{what + " failed with status " + std::to_string(code) + ": " + message};
}

struct ForwardOutput {
  Tensor y;
  Tensor aux_loss;
  size_t stat_count = 0;
};

// One layer object, created from the descriptor and destroyed with it.
class Layer {
 public:
  Layer(const pb_component_descriptor& component, const pb_config_view* config, const pb_host_api* host)
      : component_(&component),
        vtable_(static_cast<const pb_feedforward_vtable*>(component.vtable)),
        host_(host) {
    expect_ok(host_, component.create(host, config, &instance_), "create");
    if (instance_ == nullptr) throw Abort{"create succeeded but returned a NULL instance"};
  }
  ~Layer() {
    if (instance_ != nullptr) component_->destroy(instance_);
  }
  Layer(const Layer&) = delete;
  Layer& operator=(const Layer&) = delete;

  void init(const pb_layer_context& ctx) { expect_ok(host_, vtable_->init(instance_, &ctx), "init"); }

  std::vector<std::pair<std::string, Tensor>> parameters() const {
    std::vector<std::pair<std::string, Tensor>> out;
    const size_t count = vtable_->parameter_count(instance_);
    for (size_t i = 0; i < count; ++i) {
      const char* name = nullptr;
      pb_tensor* t = nullptr;
      expect_ok(host_, vtable_->parameter(instance_, i, &name, &t), "parameter " + std::to_string(i));
      if (name == nullptr) throw Abort{"parameter " + std::to_string(i) + " has a NULL name"};
      if (t == nullptr) throw Abort{"parameter '" + std::string(name) + "' is a NULL tensor"};
      host_->ops->retain(t);  // borrowed from the layer; the Tensor holds its own reference
      out.emplace_back(name, Tensor(host_->ops, t));
    }
    return out;
  }

  // Raw call: the caller owns what lands in *result.
  pb_status* forward_raw(const Tensor& x, bool training, pb_feedforward_result* result) {
    return vtable_->forward(instance_, x.handle(), training ? 1 : 0, result);
  }

  ForwardOutput forward(const Tensor& x, bool training) {
    pb_feedforward_result r{};
    r.struct_size = sizeof(pb_feedforward_result);
    expect_ok(host_, forward_raw(x, training, &r), "forward");
    ForwardOutput out;
    out.y = Tensor(host_->ops, r.y);
    out.aux_loss = Tensor(host_->ops, r.aux_loss);
    out.stat_count = r.stat_count;
    if (!out.y.defined()) throw Abort{"forward succeeded but result.y is NULL"};
    if (r.stat_count > 0 && r.stats == nullptr) throw Abort{"result.stat_count > 0 but stats is NULL"};
    for (size_t i = 0; i < r.stat_count; ++i) {
      const pb_feedforward_stat& s = *PB_ARRAY_AT(pb_feedforward_stat, r.stats, i);
      if (s.name == nullptr || s.name[0] == '\0') throw Abort{"stat " + std::to_string(i) + " has no name"};
      if (s.count > 0 && s.values == nullptr) throw Abort{"stat '" + std::string(s.name) + "' has NULL values"};
      for (size_t k = 0; k < s.count; ++k) {
        if (!std::isfinite(s.values[k])) throw Abort{"stat '" + std::string(s.name) + "' holds a non-finite value"};
      }
    }
    return out;
  }

  const pb_feedforward_vtable* vtable() const { return vtable_; }
  const pb_host_api* host() const { return host_; }

 private:
  const pb_component_descriptor* component_;
  const pb_feedforward_vtable* vtable_;
  const pb_host_api* host_;
  void* instance_ = nullptr;
};

inline bool all_finite(const std::vector<float>& v) {
  for (float f : v)
    if (!std::isfinite(f)) return false;
  return true;
}

inline bool valid_parameter_name(const std::string& name) {
  if (name.empty()) return false;
  for (char c : name) {
    const bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' || c == '.';
    if (!ok) return false;
  }
  return true;
}

inline std::vector<std::string> check_descriptor(const pb_component_descriptor& c) {
  std::vector<std::string> f;
  if (c.kind != PB_KIND_FEEDFORWARD) f.push_back("descriptor kind is not PB_KIND_FEEDFORWARD");
  if (c.interface_major != PB_FEEDFORWARD_INTERFACE_MAJOR) f.push_back("interface major differs from this SDK's");
  if (c.create == nullptr || c.destroy == nullptr) f.push_back("create or destroy is NULL");
  const auto* vt = static_cast<const pb_feedforward_vtable*>(c.vtable);
  if (vt == nullptr) {
    f.push_back("vtable is NULL");
  } else if (vt->struct_size < offsetof(pb_feedforward_vtable, forward) + sizeof(vt->forward)) {
    f.push_back("vtable struct_size is smaller than the interface 1.0 layout");
  } else if (!vt->init || !vt->parameter_count || !vt->parameter || !vt->forward) {
    f.push_back("a required vtable callback (init, parameter_count, parameter, forward) is NULL");
  }
  return f;
}

// Values of every parameter, in order, for comparing two layers.
inline std::vector<std::vector<float>> parameter_values(const Layer& layer) {
  std::vector<std::vector<float>> out;
  for (const auto& [name, t] : layer.parameters()) out.push_back(t.to_vector());
  return out;
}

}  // namespace feedforward_kit_detail

inline FeedForwardConformanceReport check_feedforward_conformance(const pb_component_descriptor& component,
                                                                  const pb_config_view* config,
                                                                  const pb_host_api* host,
                                                                  const FeedForwardConformanceOptions& options = {}) {
  namespace d = feedforward_kit_detail;
  FeedForwardConformanceReport report;
  report.failures = d::check_descriptor(component);
  if (!report.ok()) return report;
  if (host == nullptr || host->ops == nullptr) {
    report.failures.push_back("the kit needs a host with the tensor engine (pb_host_api::ops non-NULL)");
    return report;
  }
  const pb_ops_table* table = host->ops;
  const Ops ops(table);
  const pb_layer_context& ctx = options.context;
  const int64_t B = options.batch, T = options.seq_len, C = ctx.d_model;
  auto run = [&](const char* check, auto&& body) {
    try {
      body();
    } catch (const d::Abort& a) {
      report.failures.push_back(std::string(check) + ": " + a.message);
    } catch (const std::exception& e) {
      report.failures.push_back(std::string(check) + ": exception " + e.what());
    }
  };
  Generator input_gen(table, options.input_seed);
  const Tensor x = ops.randn({B, T, C}, input_gen);

  run("parameters", [&] {
    d::Layer layer(component, config, host);
    layer.init(ctx);
    std::set<std::string> seen;
    for (const auto& [name, t] : layer.parameters()) {
      if (!d::valid_parameter_name(name)) throw d::Abort{"name '" + name + "' is not [A-Za-z0-9_.]+"};
      if (!seen.insert(name).second) throw d::Abort{"name '" + name + "' appears twice"};
      if (!t.requires_grad()) throw d::Abort{"'" + name + "' does not require grad"};
      if (t.dtype() != ctx.param_dtype) throw d::Abort{"'" + name + "' is not of ctx.param_dtype"};
      if (!d::all_finite(t.to_vector())) throw d::Abort{"'" + name + "' holds non-finite values"};
    }
  });

  run("seeded init", [&] {
    d::Layer a(component, config, host), b(component, config, host), c(component, config, host);
    pb_layer_context other = ctx;
    other.seed = ctx.seed + 1;
    a.init(ctx);
    b.init(ctx);
    c.init(other);
    const auto va = d::parameter_values(a), vb = d::parameter_values(b), vc = d::parameter_values(c);
    if (va != vb) throw d::Abort{"two layers initialised with the same seed differ"};
    bool any_nonzero = false;
    for (const auto& v : va)
      for (float f : v) any_nonzero = any_nonzero || f != 0.0f;
    if (any_nonzero && va == vc) throw d::Abort{"another seed gives the same parameters"};
  });

  run("forward", [&] {
    d::Layer layer(component, config, host);
    layer.init(ctx);
    NoGradGuard no_grad(table);
    const d::ForwardOutput out = layer.forward(x, false);
    if (out.y.shape() != x.shape()) {
      throw d::Abort{"y is " + d::shape_text(out.y.shape()) + ", expected x's shape " + d::shape_text(x.shape())};
    }
    if (out.y.dtype() != x.dtype()) throw d::Abort{"y's dtype differs from x's"};
    const std::vector<float> y = out.y.to_vector();
    if (!d::all_finite(y)) throw d::Abort{"y holds non-finite values"};
    if (out.aux_loss.defined() && out.aux_loss.numel() != 1) {
      throw d::Abort{"aux_loss must be NULL or a scalar, has " + std::to_string(out.aux_loss.numel()) + " elements"};
    }
    if (layer.forward(x, false).y.to_vector() != y) throw d::Abort{"the same input twice gives different y"};
    const d::ForwardOutput trained = layer.forward(x, true);
    if (trained.y.shape() != x.shape()) throw d::Abort{"training = 1 changes y's shape"};
  });

  run("result struct_size", [&] {
    d::Layer layer(component, config, host);
    layer.init(ctx);
    NoGradGuard no_grad(table);
    pb_feedforward_result r;
    std::memset(static_cast<void*>(&r), 0xAB, sizeof r);
    r.struct_size = offsetof(pb_feedforward_result, y) + sizeof(pb_tensor*);  // `y` only
    r.y = nullptr;
    pb_status* st = layer.forward_raw(x, false, &r);
    if (st != nullptr) {
      host->status_free(st);  // refusing a layout without aux_loss is allowed
      return;
    }
    Tensor y(table, r.y);
    pb_feedforward_result sentinel;
    std::memset(static_cast<void*>(&sentinel), 0xAB, sizeof sentinel);
    const size_t tail = r.struct_size;
    if (std::memcmp(reinterpret_cast<const char*>(&r) + tail, reinterpret_cast<const char*>(&sentinel) + tail,
                    sizeof r - tail) != 0) {
      throw d::Abort{"forward wrote past result->struct_size"};
    }
    if (!y.defined()) throw d::Abort{"forward succeeded but left y NULL"};
  });

  run("wrong width", [&] {
    d::Layer layer(component, config, host);
    layer.init(ctx);
    NoGradGuard no_grad(table);
    const Tensor wide = ops.randn({B, T, C + 1}, input_gen);
    pb_feedforward_result r{};
    r.struct_size = sizeof r;
    auto [code, message] = d::take_status(host, layer.forward_raw(wide, false, &r));
    if (code == PB_STATUS_OK) {
      Tensor y(table, r.y), aux(table, r.aux_loss);
      throw d::Abort{"x of width C + 1 was accepted"};
    }
    if (code != PB_STATUS_INVALID_ARGUMENT) {
      throw d::Abort{"x of width C + 1 gave status " + std::to_string(code) + " instead of INVALID_ARGUMENT: " +
                     message};
    }
    if (message.empty()) throw d::Abort{"the refusal of x of width C + 1 has no message"};
  });

  run("positions", [&] {
    d::Layer layer(component, config, host);
    layer.init(ctx);
    NoGradGuard no_grad(table);
    const std::vector<float> base_x = x.to_vector();
    const std::vector<float> base_y = layer.forward(x, false).y.to_vector();
    std::vector<std::pair<int64_t, int64_t>> positions = {{B - 1, T - 1}};
    if (options.check_position_independence) positions = {{0, 0}, {B - 1, T / 2}, {B - 1, T - 1}};
    for (const auto& [b, t] : positions) {
      std::vector<float> moved = base_x;
      for (int64_t c = 0; c < C; ++c) moved[static_cast<size_t>((b * T + t) * C + c)] += 0.5f + 0.25f * static_cast<float>(c % 3);
      const std::vector<float> y = layer.forward(ops.from_vector(moved, {B, T, C}), false).y.to_vector();
      bool own_changed = false;
      for (int64_t bb = 0; bb < B; ++bb) {
        for (int64_t tt = 0; tt < T; ++tt) {
          const bool own = bb == b && tt == t;
          for (int64_t c = 0; c < C; ++c) {
            const size_t i = static_cast<size_t>((bb * T + tt) * C + c);
            const float diff = std::fabs(y[i] - base_y[i]);
            if (own) {
              own_changed = own_changed || diff > 1e-6f;
            } else if (diff > 1e-5f * (1.0f + std::fabs(base_y[i]))) {
              throw d::Abort{"perturbing position (b " + std::to_string(b) + ", t " + std::to_string(t) +
                             ") changed the output at (b " + std::to_string(bb) + ", t " + std::to_string(tt) + ")"};
            }
          }
        }
      }
      if (!own_changed) {
        throw d::Abort{"perturbing position (b " + std::to_string(b) + ", t " + std::to_string(t) +
                       ") did not change its own output"};
      }
    }
  });

  run("gradients", [&] {
    if (ctx.param_dtype != PB_DTYPE_F32) throw d::Abort{"gradcheck needs ctx.param_dtype f32"};
    d::Layer layer(component, config, host);
    layer.init(ctx);
    Tensor leaf = ops.from_vector(x.to_vector(), {B, T, C});
    leaf.requires_grad(true);
    std::vector<Tensor> inputs = {leaf};
    std::vector<std::string> names = {"x"};
    for (auto& [name, t] : layer.parameters()) {
      inputs.push_back(t);
      names.push_back(name);
    }
    const bool has_aux = layer.forward(leaf, false).aux_loss.defined();
    for (int through_aux = 0; through_aux <= (has_aux ? 1 : 0); ++through_aux) {
      const GradcheckResult r = gradcheck(
          table,
          [&](const std::vector<Tensor>& in) {
            d::ForwardOutput out = layer.forward(in[0], false);
            return through_aux != 0 ? out.aux_loss : out.y;
          },
          inputs, options.gradcheck);
      if (!r.ok) {
        std::string detail = r.message;
        for (size_t k = 0; k < names.size(); ++k) {
          const std::string tag = "input " + std::to_string(k) + " ";
          if (detail.rfind(tag, 0) == 0) detail = "'" + names[k] + "' " + detail.substr(tag.size());
        }
        throw d::Abort{std::string(through_aux != 0 ? "aux_loss" : "y") + ": " + detail};
      }
    }
    for (Tensor& t : inputs) t.zero_grad();
  });
  return report;
}

}  // namespace patchbay::testing
