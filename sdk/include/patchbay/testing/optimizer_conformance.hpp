// Patchbay SDK conformance kit for optimizers (PB_KIND_OPTIMIZER): the checks every optimizer
// plugin, built-in or third-party, must pass. Header-only, test-framework-agnostic: the check
// returns a report whose failures list is empty on success, so a doctest / gtest / Catch test
// asserts on it and prints the messages.
//
//   namespace pt = patchbay::testing;
//   pt::OptimizerCase c;                                   // a few small parameters ...
//   c.params = {{"w", {2, 2}, {0.5f, -1.f, 2.f, 0.f}}, {"b", {2}, {0.1f, 0.2f}, 0.0}};
//   c.lrs = {0.1, 0.1, 0.05};                              // ... the lr of each step ...
//   c.grads = {{{...4 values...}, {...2 values...}}, {{...}, {}}, ...};  // {} = no grad
//   c.expected = {...};           // known answers, or pt::fill_expected(c, reference_step)
//   pt::ConfigBuilder config(kMyDescriptor, "beta2 = 0.95");  // defaults + overrides
//   const pt::OptimizerConformanceReport report =
//       pt::check_optimizer_conformance(kMyDescriptor, config.view(), host, c);
//   CHECK_MESSAGE(report.ok(), report.message());
//
// `host` must carry the tensor engine (pb_host_api::ops non-NULL): a Patchbay host provides
// it. The kit drives the optimizer through its C ABI only (pb_optimizer_vtable). Parameters are
// f32 CPU leaves; a gradient g is put in place by backward() of sum(p * g), which yields g
// exactly; an empty gradient leaves the grad undefined. What is checked (patchbay/optimizer.h
// is the contract):
//  descriptor  kind, interface major, vtable struct_size and required callbacks;
//  known answers  after every step each parameter matches c.expected within
//              |actual - expected| <= atol + rtol |expected|;
//  skipping    a parameter without a gradient keeps its exact bits through that step;
//  state       names non-empty and unique; tensors non-NULL; count and names unchanged by
//              steps (all state exists before the first step);
//  resume      run half the steps, save every state tensor, create a fresh optimizer, register
//              parameters holding the same values, overwrite its state in place by name, run the
//              other half on both: parameters and state bit-identical;
//  ordering    add_parameter with an index out of order is refused (INVALID_ARGUMENT);
//  scaled step when step_scaled is provided (optimizer.h minor 1): steps with grad_scale
//              s = 0.3, 1, 0.0625, 0.7, ... (cycling) through step_scaled end bit-identical,
//              parameters and state, to a run whose gradients hold g * (float)s (f32) and
//              step(); the gradients handed to step_scaled keep their bits (never written);
//  bf16 copies when set_bf16_copy is provided (optimizer.h minor 2): after every step each
//              registered copy holds its parameter rounded to bf16 (to_dtype), bit for bit; a
//              parameter the step skips keeps its copy; parameters and state end bit-identical
//              to a run without copies; an f32 "copy" is refused (INVALID_ARGUMENT);
//  sharding    when set_shard is provided: for world 2 and 3 and every rank, owned parameters
//              (index % world == rank) end bit-identical to the unsharded run, the others keep
//              their initial bits, state names of the ranks partition the unsharded names, and
//              set_shard after add_parameter is refused.
#pragma once

#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <functional>
#include <map>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "patchbay/optimizer.h"
#include "patchbay/tensor.hpp"
#include "patchbay/testing/config_builder.hpp"

namespace patchbay::testing {

struct OptimizerParamSpec {
  std::string name;
  std::vector<int64_t> shape;
  std::vector<float> values;  // initial values, row-major, numel of shape
  double weight_decay_scale = 1.0;
  double lr_scale = 1.0;
};

struct OptimizerCase {
  std::vector<OptimizerParamSpec> params;
  std::vector<double> lrs;  // the learning rate of each step; lrs.size() steps are run
  // grads[s][i]: gradient of parameter i at step s (numel values), or empty: undefined grad.
  std::vector<std::vector<std::vector<float>>> grads;
  // expected[s][i]: values of parameter i after step s. Empty: no known answers (the other
  // checks still run).
  std::vector<std::vector<std::vector<double>>> expected;
  double rtol = 1e-5;
  double atol = 1e-7;
};

// A reference update of one parameter, called for each step s and parameter i whose gradient
// is defined, in step order: update `values` in place. It keeps its own state (capture it).
using OptimizerReferenceStep =
    std::function<void(size_t step, size_t param_index, std::vector<double>& values,
                       const std::vector<float>& grad, double lr, const OptimizerParamSpec& param)>;

// Fills c.expected by running `reference` over c's steps from the initial values.
inline void fill_expected(OptimizerCase& c, const OptimizerReferenceStep& reference) {
  std::vector<std::vector<double>> values;
  for (const OptimizerParamSpec& p : c.params)
    values.emplace_back(p.values.begin(), p.values.end());
  c.expected.clear();
  for (size_t s = 0; s < c.lrs.size(); ++s) {
    for (size_t i = 0; i < c.params.size(); ++i) {
      if (!c.grads[s][i].empty()) reference(s, i, values[i], c.grads[s][i], c.lrs[s], c.params[i]);
    }
    c.expected.push_back(values);
  }
}

struct OptimizerConformanceReport {
  std::vector<std::string> failures;
  std::vector<std::string> notes;  // checks skipped, e.g. "no set_shard: sharding not checked"
  bool ok() const { return failures.empty(); }
  std::string message() const {
    std::string out;
    for (const std::string& f : failures) out += (out.empty() ? "" : "\n") + f;
    return out.empty() ? "ok" : out;
  }
};

namespace optimizer_kit_detail {

struct Abort {  // stops the current check; its message is the failure
  std::string message;
};

inline std::pair<pb_status_code, std::string> take_status(const pb_host_api* host, pb_status* st) {
  if (st == nullptr) return {PB_STATUS_OK, ""};
  std::pair<pb_status_code, std::string> out{host->status_code(st), host->status_message(st)};
  host->status_free(st);
  return out;
}
inline void expect_ok(const pb_host_api* host, pb_status* st, const std::string& what) {
  auto [code, message] = take_status(host, st);
  if (code != PB_STATUS_OK)
    throw Abort{what + " failed with status " + std::to_string(code) + ": " + message};
}

inline size_t dtype_bytes(pb_dtype dtype) {
  return (dtype == PB_DTYPE_BF16 || dtype == PB_DTYPE_F16) ? 2 : dtype == PB_DTYPE_I64 ? 8 : 4;
}

// Raw bytes of a tensor (row-major), for bit-exact comparisons.
inline std::vector<unsigned char> bytes_of(const Tensor& t) {
  std::vector<unsigned char> out(static_cast<size_t>(t.numel()) * dtype_bytes(t.dtype()));
  check_ops_status(t.ops(), t.ops()->copy_to_host(t.handle(), out.data(), out.size()),
                   "copy_to_host");
  return out;
}

struct SavedState {
  std::string name;
  std::vector<int64_t> shape;
  pb_dtype dtype;
  std::vector<unsigned char> bytes;
};

// One optimizer object with its own parameters, driven through the vtable.
class Run {
 public:
  Run(const pb_component_descriptor& d, const pb_config_view* config, const pb_host_api* host)
      : d_(d),
        vt_(static_cast<const pb_optimizer_vtable*>(d.vtable)),
        host_(host),
        ops_(host->ops) {
    expect_ok(host_, d_.create(host_, config, &object_), "create");
  }
  Run(const Run&) = delete;
  Run& operator=(const Run&) = delete;
  ~Run() {
    if (object_ != nullptr) d_.destroy(object_);
  }

  bool can_shard() const { return vt_->set_shard != nullptr; }
  pb_status* set_shard(int64_t rank, int64_t world) { return vt_->set_shard(object_, rank, world); }

  // Registers the case's parameters with `values` (one vector per parameter).
  void add_parameters(const OptimizerCase& c, const std::vector<std::vector<float>>& values) {
    for (size_t i = 0; i < c.params.size(); ++i) {
      const OptimizerParamSpec& spec = c.params[i];
      Tensor t = ops_.from_vector(values[i], spec.shape);
      t.requires_grad(true);
      params_.push_back(t);
      pb_param_options options{sizeof(pb_param_options), spec.weight_decay_scale, spec.lr_scale,
                               spec.weight_decay_scale == 0.0 ? "no_decay" : "decay"};
      expect_ok(host_, vt_->add_parameter(object_, i, spec.name.c_str(), t.handle(), &options),
                "add_parameter('" + spec.name + "')");
    }
  }
  pb_status* add_raw(size_t index, const char* name, const Tensor& t) {
    return vt_->add_parameter(object_, index, name, t.handle(), nullptr);
  }

  // Sets every parameter's grad for step s, then steps with c.lrs[s].
  void step(const OptimizerCase& c, size_t s) {
    set_grads(c, s, 1.0f);
    expect_ok(host_, vt_->step(object_, c.lrs[s]), "step " + std::to_string(s));
  }

  bool can_scale() const {
    return PB_HAS_FIELD(vt_, pb_optimizer_vtable, step_scaled) && vt_->step_scaled != nullptr;
  }
  // Step s with every gradient multiplied by (float)grad_scale first, in f32 (what a host
  // without step_scaled does), then step().
  void step_prescaled(const OptimizerCase& c, size_t s, double grad_scale) {
    set_grads(c, s, static_cast<float>(grad_scale));
    expect_ok(host_, vt_->step(object_, c.lrs[s]), "step " + std::to_string(s));
  }
  // Step s through step_scaled(lr, grad_scale) with the unscaled gradients; fails when a
  // gradient changed.
  void step_scaled(const OptimizerCase& c, size_t s, double grad_scale) {
    set_grads(c, s, 1.0f);
    expect_ok(host_, vt_->step_scaled(object_, c.lrs[s], grad_scale),
              "step_scaled " + std::to_string(s));
    for (size_t i = 0; i < params_.size(); ++i) {
      if (c.grads[s][i].empty()) continue;
      if (!same_grad_bits(params_[i].grad().to_vector(), c.grads[s][i]))
        throw Abort{"step_scaled " + std::to_string(s) + " wrote the gradient of '" +
                    c.params[i].name + "' (it must read g * grad_scale, not store it)"};
    }
  }

  bool can_copy() const {
    return PB_HAS_FIELD(vt_, pb_optimizer_vtable, set_bf16_copy) && vt_->set_bf16_copy != nullptr;
  }
  pb_status* set_bf16_copy(size_t index, const Tensor& copy) {
    return vt_->set_bf16_copy(object_, index, copy.defined() ? copy.handle() : nullptr);
  }

  std::vector<std::pair<std::string, Tensor>> states() const {
    std::vector<std::pair<std::string, Tensor>> out;
    const size_t n = vt_->state_count(object_);
    for (size_t k = 0; k < n; ++k) {
      const char* name = nullptr;
      pb_tensor* h = nullptr;
      expect_ok(host_, vt_->state_tensor(object_, k, &name, &h),
                "state_tensor(" + std::to_string(k) + ")");
      if (name == nullptr || name[0] == '\0')
        throw Abort{"state " + std::to_string(k) + " has no name"};
      if (h == nullptr) throw Abort{"state '" + std::string(name) + "' has a NULL tensor"};
      ops_.table()->retain(h);  // borrowed: take our own reference
      out.emplace_back(name, Tensor(ops_.table(), h));
    }
    return out;
  }
  std::vector<SavedState> save_state() const {
    std::vector<SavedState> out;
    for (const auto& [name, t] : states())
      out.push_back(SavedState{name, t.shape(), t.dtype(), bytes_of(t)});
    return out;
  }

  const std::vector<Tensor>& params() const { return params_; }
  std::vector<std::vector<float>> values() const {
    std::vector<std::vector<float>> out;
    for (const Tensor& p : params_) out.push_back(p.detach().to_vector());
    return out;
  }

 private:
  // Every parameter's grad for step s, each element times `scale` (f32; 1: as given).
  void set_grads(const OptimizerCase& c, size_t s, float scale) {
    for (size_t i = 0; i < params_.size(); ++i) {
      params_[i].zero_grad();
      if (c.grads[s][i].empty()) continue;
      std::vector<float> values = c.grads[s][i];
      if (scale != 1.0f)
        for (float& v : values) v *= scale;
      Tensor g = ops_.from_vector(values, c.params[i].shape);
      (params_[i] * g).sum().backward();
    }
  }
  static bool same_grad_bits(const std::vector<float>& a, const std::vector<float>& b) {
    return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0;
  }

  const pb_component_descriptor& d_;
  const pb_optimizer_vtable* vt_;
  const pb_host_api* host_;
  Ops ops_;
  void* object_ = nullptr;
  std::vector<Tensor> params_;
};

inline std::vector<std::vector<float>> initial_values(const OptimizerCase& c) {
  std::vector<std::vector<float>> out;
  for (const OptimizerParamSpec& p : c.params) out.push_back(p.values);
  return out;
}

inline std::vector<std::string> names_of(const std::vector<SavedState>& states) {
  std::vector<std::string> out;
  for (const SavedState& s : states) out.push_back(s.name);
  return out;
}

inline bool same_bits(const std::vector<float>& a, const std::vector<float>& b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0;
}

// Every state tensor of `a` against `b` (same names in the same order, same bytes); a
// mismatch reads "<check>: state '<name>' differs from <reference>".
inline void check_same_state(const Run& a, const Run& b, const std::string& check,
                             const std::string& reference, std::vector<std::string>& failures) {
  const auto sa = a.save_state();
  const auto sb = b.save_state();
  for (size_t k = 0; k < sa.size() && k < sb.size(); ++k) {
    if (sa[k].name != sb[k].name || sa[k].bytes != sb[k].bytes)
      failures.push_back(check + ": state '" + sa[k].name + "' differs from " + reference);
  }
}

inline void check_case_shape(const OptimizerCase& c) {
  if (c.params.empty() || c.lrs.empty())
    throw Abort{"the case needs parameters and at least one step"};
  if (c.grads.size() != c.lrs.size()) throw Abort{"the case needs one grads entry per step"};
  if (!c.expected.empty() && c.expected.size() != c.lrs.size())
    throw Abort{"expected needs one entry per step"};
  for (size_t s = 0; s < c.grads.size(); ++s) {
    if (c.grads[s].size() != c.params.size())
      throw Abort{"grads[" + std::to_string(s) + "] needs one per parameter"};
  }
}

inline void check_descriptor(const pb_component_descriptor& d, std::vector<std::string>& failures) {
  if (d.kind != PB_KIND_OPTIMIZER) failures.push_back("descriptor kind is not PB_KIND_OPTIMIZER");
  if (d.interface_major != PB_OPTIMIZER_INTERFACE_MAJOR)
    failures.push_back("interface major differs from the SDK's");
  const auto* vt = static_cast<const pb_optimizer_vtable*>(d.vtable);
  if (vt == nullptr) {
    failures.push_back("vtable is NULL");
    return;
  }
  if (vt->struct_size < offsetof(pb_optimizer_vtable, state_tensor) + sizeof(vt->state_tensor)) {
    failures.push_back("pb_optimizer_vtable struct_size is smaller than the 1.0 layout");
    return;
  }
  if (vt->add_parameter == nullptr || vt->step == nullptr || vt->state_count == nullptr ||
      vt->state_tensor == nullptr) {
    failures.push_back(
        "a required optimizer callback (add_parameter, step, state_count, state_tensor) is NULL");
  }
}

// Known answers, skipping, state naming and stability. Returns the final values.
inline std::vector<std::vector<float>> check_steps(const pb_component_descriptor& d,
                                                   const pb_config_view* config,
                                                   const pb_host_api* host, const OptimizerCase& c,
                                                   std::vector<std::string>& failures) {
  Run run(d, config, host);
  run.add_parameters(c, initial_values(c));
  const std::vector<std::string> names = names_of(run.save_state());
  std::set<std::string> unique(names.begin(), names.end());
  if (unique.size() != names.size()) failures.push_back("state names are not unique");
  for (size_t s = 0; s < c.lrs.size(); ++s) {
    const std::vector<std::vector<float>> before = run.values();
    run.step(c, s);
    const std::vector<std::vector<float>> after = run.values();
    for (size_t i = 0; i < c.params.size(); ++i) {
      const std::string where =
          "step " + std::to_string(s) + ", parameter '" + c.params[i].name + "'";
      if (c.grads[s][i].empty() && !same_bits(before[i], after[i])) {
        failures.push_back(where + ": changed although its grad is undefined (must be skipped)");
      }
      if (c.expected.empty()) continue;
      for (size_t k = 0; k < after[i].size(); ++k) {
        const double want = c.expected[s][i][k];
        const double got = after[i][k];
        if (!(std::fabs(got - want) <= c.atol + c.rtol * std::fabs(want))) {
          failures.push_back(where + " element " + std::to_string(k) + ": got " +
                             std::to_string(got) + ", expected " + std::to_string(want));
          break;
        }
      }
    }
    if (names_of(run.save_state()) != names)
      failures.push_back("state names changed at step " + std::to_string(s));
  }
  return run.values();
}

inline void check_resume(const pb_component_descriptor& d, const pb_config_view* config,
                         const pb_host_api* host, const OptimizerCase& c,
                         std::vector<std::string>& failures) {
  const size_t split = c.lrs.size() < 2 ? 1 : c.lrs.size() / 2;
  Run original(d, config, host);
  original.add_parameters(c, initial_values(c));
  for (size_t s = 0; s < split; ++s) original.step(c, s);
  const std::vector<SavedState> saved = original.save_state();

  Run resumed(d, config, host);
  resumed.add_parameters(c, original.values());
  const auto states = resumed.states();
  std::map<std::string, Tensor> by_name(states.begin(), states.end());
  if (by_name.size() != saved.size()) {
    failures.push_back("resume: a fresh optimizer has " + std::to_string(by_name.size()) +
                       " state tensors, the " + "saved one " + std::to_string(saved.size()));
    return;
  }
  for (const SavedState& s : saved) {
    auto it = by_name.find(s.name);
    if (it == by_name.end()) {
      failures.push_back("resume: a fresh optimizer has no state '" + s.name + "'");
      return;
    }
    Tensor& t = it->second;
    if (t.shape() != s.shape || t.dtype() != s.dtype) {
      failures.push_back("resume: state '" + s.name +
                         "' has another shape or dtype in a fresh optimizer");
      return;
    }
    check_ops_status(t.ops(), t.ops()->copy_from_host(t.handle(), s.bytes.data(), s.bytes.size()),
                     "copy_from_host");
  }
  for (size_t s = split; s < c.lrs.size(); ++s) {
    original.step(c, s);
    resumed.step(c, s);
  }
  const auto a = original.values();
  const auto b = resumed.values();
  for (size_t i = 0; i < a.size(); ++i) {
    if (!same_bits(a[i], b[i])) {
      failures.push_back(
          "resume: parameter '" + c.params[i].name +
          "' differs from the uninterrupted run (state not fully exposed or not read back)");
    }
  }
  check_same_state(original, resumed, "resume", "the uninterrupted run", failures);
}

// The clip factor of step s in check_scaled: below 1 mostly (clipping), 1 once (no clipping).
inline double kit_grad_scale(size_t s) {
  constexpr double kScales[] = {0.3, 1.0, 0.0625, 0.7, 0.123456789};
  return kScales[s % (sizeof(kScales) / sizeof(kScales[0]))];
}

inline void check_scaled(const pb_component_descriptor& d, const pb_config_view* config,
                         const pb_host_api* host, const OptimizerCase& c,
                         OptimizerConformanceReport& report) {
  Run folded(d, config, host);
  if (!folded.can_scale()) {
    report.notes.push_back(
        "step_scaled is NULL (interface 1.0 or not supported): the host scales the gradients "
        "itself; the scaled step is not checked");
    return;
  }
  Run prescaled(d, config, host);
  folded.add_parameters(c, initial_values(c));
  prescaled.add_parameters(c, initial_values(c));
  for (size_t s = 0; s < c.lrs.size(); ++s) {
    folded.step_scaled(c, s, kit_grad_scale(s));
    prescaled.step_prescaled(c, s, kit_grad_scale(s));
    const auto a = folded.values();
    const auto b = prescaled.values();
    for (size_t i = 0; i < a.size(); ++i) {
      if (!same_bits(a[i], b[i])) {
        report.failures.push_back("scaled step " + std::to_string(s) + " (grad_scale " +
                                  std::to_string(kit_grad_scale(s)) + "): parameter '" +
                                  c.params[i].name +
                                  "' differs from scaling the gradients first and step()");
        return;
      }
    }
  }
  check_same_state(folded, prescaled, "scaled step",
                   "scaling the gradients first and step()", report.failures);
}

inline void check_bf16_copies(const pb_component_descriptor& d, const pb_config_view* config,
                              const pb_host_api* host, const OptimizerCase& c,
                              OptimizerConformanceReport& report) {
  Run with(d, config, host);
  if (!with.can_copy()) {
    report.notes.push_back(
        "set_bf16_copy is NULL (interface < 1.2 or not supported): the host rounds the weights "
        "itself; bf16 copies not checked");
    return;
  }
  Run without(d, config, host);
  with.add_parameters(c, initial_values(c));
  without.add_parameters(c, initial_values(c));
  const Ops ops(host->ops);
  {
    auto [code, message] =
        take_status(host, with.set_bf16_copy(0, ops.zeros(c.params[0].shape, PB_DTYPE_F32)));
    if (code != PB_STATUS_INVALID_ARGUMENT)
      report.failures.push_back("set_bf16_copy with an f32 tensor returned status " +
                                std::to_string(code) + " (expected PB_STATUS_INVALID_ARGUMENT)");
  }
  std::vector<Tensor> copies(c.params.size());
  for (size_t i = 0; i < c.params.size(); ++i) {
    Tensor copy = ops.zeros(c.params[i].shape, PB_DTYPE_BF16);
    auto [code, message] = take_status(host, with.set_bf16_copy(i, copy));
    if (code == PB_STATUS_UNSUPPORTED) continue;  // allowed: the host rounds this one
    if (code != PB_STATUS_OK)
      throw Abort{"set_bf16_copy('" + c.params[i].name + "') failed: " + message};
    copies[i] = copy;
  }
  std::vector<std::vector<unsigned char>> before(c.params.size());
  for (size_t i = 0; i < c.params.size(); ++i)
    if (copies[i].defined()) before[i] = bytes_of(copies[i]);
  for (size_t s = 0; s < c.lrs.size(); ++s) {
    with.step(c, s);
    without.step(c, s);
    const auto a = with.values();
    const auto b = without.values();
    for (size_t i = 0; i < c.params.size(); ++i) {
      const std::string where =
          "step " + std::to_string(s) + ", parameter '" + c.params[i].name + "'";
      if (!same_bits(a[i], b[i])) {
        report.failures.push_back("bf16 copies: " + where + " differs from a run without copies");
        return;
      }
      if (!copies[i].defined()) continue;
      const std::vector<unsigned char> now = bytes_of(copies[i]);
      const std::vector<unsigned char> want =
          c.grads[s][i].empty() ? before[i] : bytes_of(with.params()[i].detach().to(PB_DTYPE_BF16));
      if (now != want) {
        report.failures.push_back(
            "bf16 copies: " + where +
            (c.grads[s][i].empty() ? ": the copy changed although the step skipped the parameter"
                                   : ": the copy is not the parameter rounded to bf16"));
        return;
      }
      before[i] = now;
    }
  }
  check_same_state(with, without, "bf16 copies", "a run without copies", report.failures);
}

inline void check_order(const pb_component_descriptor& d, const pb_config_view* config,
                        const pb_host_api* host, const OptimizerCase& c,
                        std::vector<std::string>& failures) {
  Run run(d, config, host);
  Tensor t = Ops(host->ops).from_vector(c.params[0].values, c.params[0].shape);
  t.requires_grad(true);
  auto [code, message] = take_status(host, run.add_raw(1, c.params[0].name.c_str(), t));
  if (code != PB_STATUS_INVALID_ARGUMENT) {
    failures.push_back("add_parameter with index 1 before index 0 returned status " +
                       std::to_string(code) + " (expected PB_STATUS_INVALID_ARGUMENT)");
  }
}

inline void check_sharding(const pb_component_descriptor& d, const pb_config_view* config,
                           const pb_host_api* host, const OptimizerCase& c,
                           const std::vector<std::vector<float>>& unsharded_final,
                           OptimizerConformanceReport& report) {
  std::vector<std::string> all_names;
  {
    Run run(d, config, host);
    if (!run.can_shard()) {
      report.notes.push_back("set_shard is NULL: sharding not checked");
      return;
    }
    run.add_parameters(c, initial_values(c));
    all_names = names_of(run.save_state());
    auto [code, message] = take_status(host, run.set_shard(0, 2));
    if (code == PB_STATUS_OK)
      report.failures.push_back("set_shard after add_parameter was accepted");
  }
  const std::set<std::string> expected_names(all_names.begin(), all_names.end());
  for (int64_t world : {2, 3}) {
    std::multiset<std::string> seen;
    for (int64_t rank = 0; rank < world; ++rank) {
      const std::string where = "shard " + std::to_string(rank) + "/" + std::to_string(world);
      Run run(d, config, host);
      expect_ok(host, run.set_shard(rank, world), where + " set_shard");
      run.add_parameters(c, initial_values(c));
      for (const std::string& n : names_of(run.save_state())) seen.insert(n);
      for (size_t s = 0; s < c.lrs.size(); ++s) run.step(c, s);
      const auto values = run.values();
      for (size_t i = 0; i < c.params.size(); ++i) {
        const bool owned = static_cast<int64_t>(i) % world == rank;
        const std::vector<float>& want = owned ? unsharded_final[i] : c.params[i].values;
        if (!same_bits(values[i], want)) {
          report.failures.push_back(
              where + ": parameter '" + c.params[i].name + "' " +
              (owned ? "(owned) differs from the unsharded run" : "(not owned) was modified"));
        }
      }
    }
    if (std::set<std::string>(seen.begin(), seen.end()) != expected_names ||
        seen.size() != expected_names.size()) {
      report.failures.push_back(
          "world " + std::to_string(world) +
          ": the ranks' state names do not partition the unsharded state names");
    }
  }
}

}  // namespace optimizer_kit_detail

inline OptimizerConformanceReport check_optimizer_conformance(
    const pb_component_descriptor& descriptor, const pb_config_view* config,
    const pb_host_api* host, const OptimizerCase& c) {
  namespace k = optimizer_kit_detail;
  OptimizerConformanceReport report;
  k::check_descriptor(descriptor, report.failures);
  if (!report.failures.empty()) return report;
  if (host == nullptr || host->ops == nullptr) {
    report.failures.push_back(
        "the kit needs a host with the tensor engine (pb_host_api::ops non-NULL)");
    return report;
  }
  auto run_check = [&](const char* name, auto&& check) {
    try {
      check();
    } catch (const k::Abort& e) {
      report.failures.push_back(std::string(name) + ": " + e.message);
    } catch (const std::exception& e) {
      report.failures.push_back(std::string(name) + ": " + e.what());
    }
  };
  std::vector<std::vector<float>> final_values;
  run_check("case", [&] { k::check_case_shape(c); });
  if (!report.failures.empty()) return report;
  run_check("steps",
            [&] { final_values = k::check_steps(descriptor, config, host, c, report.failures); });
  run_check("resume", [&] { k::check_resume(descriptor, config, host, c, report.failures); });
  run_check("ordering", [&] { k::check_order(descriptor, config, host, c, report.failures); });
  run_check("scaled step", [&] { k::check_scaled(descriptor, config, host, c, report); });
  run_check("bf16 copies", [&] { k::check_bf16_copies(descriptor, config, host, c, report); });
  if (!final_values.empty()) {
    run_check("sharding",
              [&] { k::check_sharding(descriptor, config, host, c, final_values, report); });
  }
  return report;
}

}  // namespace patchbay::testing
