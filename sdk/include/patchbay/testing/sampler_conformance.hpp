// Patchbay SDK conformance kit for samplers (PB_KIND_SAMPLER): the checks every sampler
// plugin, built-in or third-party, must pass. Header-only, test-framework-agnostic: each
// check returns a list of failure messages (empty = pass), so a doctest/gtest/Catch test
// asserts on it and prints the messages.
//
//   #include <patchbay/testing/sampler_conformance.hpp>
//   namespace pt = patchbay::testing;
//   pt::SamplerConfig config(kMyDescriptor, {{"p", 0.5}});  // schema defaults + overrides
//   const auto failures = pt::check_sampler_conformance(kMyDescriptor, config.view(),
//                                                       pt::sampler_test_host());
//   CHECK_MESSAGE(failures.empty(), pt::join_failures(failures));
//
// What is checked (patchbay/sampler.h is the contract):
//  descriptor  kind, interface major, vtable size, exactly one of PROCESSOR/SELECTOR, the
//              callbacks each capability requires;
//  processors  on random logits (with -inf entries, ties, one-finite-token vectors) and random
//              histories: never NaN/+inf, never raises a -inf token, keeps a finite logit; a
//              refusal is a status with a message and a code other than INTERNAL, and at least
//              half of the inputs succeed; same input -> same output; a clone and a reset
//              object give the same output; NaN input is refused with INVALID_ARGUMENT;
//  selectors   ids in range with finite logits; two objects with one config draw the same
//              sequence; reset() repeats the first draws; a clone made after some draws
//              continues exactly as its original and advancing it leaves the original's next
//              draws unchanged (llama.cpp's mirostat v1 clone fails this); with a `seed` key,
//              another seed changes the draws; all -inf logits are refused with
//              INVALID_ARGUMENT.
// Each generated token is passed to accept() of the selector under test, as a generator does.
#pragma once

#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "patchbay/component.h"
#include "patchbay/sampler.h"
#include "patchbay/testing/config_builder.hpp"
#include "patchbay/testing/standalone_host.hpp"

namespace patchbay::testing {

// A pb_host_api for tests that run a plugin without the Patchbay host
// (patchbay/testing/standalone_host.hpp). Static.
inline const pb_host_api* sampler_test_host() { return standalone_test_host(); }

// ---- config values from a component's schema ------------------------------------------

// The config of a sampler under test: patchbay/testing/config_builder.hpp (schema defaults,
// checked overrides, key-value pairs or `key = value` lines); the name this kit has always
// offered.
class SamplerConfig : public ConfigBuilder {
 public:
  using ConfigBuilder::ConfigBuilder;
};

// ---- the checks ----------------------------------------------------------------------

struct SamplerConformanceOptions {
  size_t vocab = 48;            // logits length of the generated inputs
  size_t inputs = 40;           // random logits vectors (plus fixed edge cases)
  size_t draws = 24;            // selector draws per sequence compared
  uint64_t input_seed = 12345;  // generator of the inputs (not the sampler's seed)
  // Sampler 1.1: handed to set_vocabulary of components with PB_SAMPLER_CAP_NEEDS_VOCABULARY
  // right after create (borrowed; its vocab must equal `vocab`). Required for them.
  const pb_sampler_vocabulary* vocabulary = nullptr;
};

inline std::string join_failures(const std::vector<std::string>& failures) {
  std::string out;
  for (const std::string& f : failures) out += f + "\n";
  return out;
}

namespace sampler_kit_detail {

struct InputRng {  // splitmix64, for reproducible test inputs
  uint64_t state;
  uint64_t next() {
    uint64_t z = (state += 0x9e3779b97f4a7c15ULL);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
  }
  double uniform() { return static_cast<double>(next() >> 11) * 0x1.0p-53; }
  size_t below(size_t n) { return static_cast<size_t>(next() % n); }
};

struct Input {
  std::vector<float> logits;
  std::vector<int32_t> history;
  size_t prompt_len = 0;
};

// Random logits in [-scale, scale] with ~20% -inf (never all), repeated values (ties), a
// history over a few ids (so n-grams and penalties fire); plus edge cases.
inline std::vector<Input> make_inputs(const SamplerConformanceOptions& o, double scale) {
  InputRng rng{o.input_seed};
  std::vector<Input> inputs;
  for (size_t n = 0; n < o.inputs; ++n) {
    Input in;
    in.logits.resize(o.vocab);
    for (float& z : in.logits) z = static_cast<float>((2.0 * rng.uniform() - 1.0) * scale);
    for (size_t t = 0; t < o.vocab / 4; ++t) in.logits[rng.below(o.vocab)] = in.logits[0];
    for (size_t t = 0; t < o.vocab / 5; ++t) in.logits[rng.below(o.vocab)] = -INFINITY;
    in.logits[rng.below(o.vocab)] = static_cast<float>(scale * rng.uniform());
    const size_t len = rng.below(3 * o.vocab);
    for (size_t t = 0; t < len; ++t) in.history.push_back(static_cast<int32_t>(rng.below(8)));
    in.prompt_len = len == 0 ? 0 : rng.below(len + 1);
    inputs.push_back(std::move(in));
  }
  Input one_finite;  // a single allowed token
  one_finite.logits.assign(o.vocab, -INFINITY);
  one_finite.logits[o.vocab / 2] = 0.5f;
  inputs.push_back(one_finite);
  Input flat;  // all equal
  flat.logits.assign(o.vocab, 1.0f);
  flat.history = {1, 2, 3, 1, 2};
  flat.prompt_len = 2;
  inputs.push_back(flat);
  return inputs;
}

struct Object {  // an object and its destroy; closes on scope exit
  const pb_component_descriptor* d = nullptr;
  void* p = nullptr;
  Object() = default;
  Object(const pb_component_descriptor* desc, void* ptr) : d(desc), p(ptr) {}
  Object(Object&& o) noexcept : d(o.d), p(std::exchange(o.p, nullptr)) {}
  Object& operator=(Object&& o) noexcept {
    std::swap(d, o.d);
    std::swap(p, o.p);
    return *this;
  }
  ~Object() {
    if (p != nullptr) d->destroy(p);
  }
};

class Checker {
 public:
  Checker(const pb_component_descriptor& d, const pb_config_view* config, const pb_host_api* host,
          const SamplerConformanceOptions& o)
      : d_(d),
        config_(config),
        host_(host),
        o_(o),
        vt_(static_cast<const pb_sampler_vtable*>(d.vtable)) {}

  std::vector<std::string> run() {
    if (!check_descriptor()) return failures_;
    if (vt_->capabilities & PB_SAMPLER_CAP_PROCESSOR) check_processor();
    if (vt_->capabilities & PB_SAMPLER_CAP_SELECTOR) check_selector();
    return failures_;
  }
  // A fresh object made with `config`; records a failure and returns an empty one on error.
  Object create(const pb_config_view* config) {
    void* p = nullptr;
    if (!ok(d_.create(host_, config, &p), "create")) return Object(&d_, nullptr);
    Object obj(&d_, p);
    if ((vt_->capabilities & PB_SAMPLER_CAP_NEEDS_VOCABULARY) != 0) {
      if (o_.vocabulary == nullptr || o_.vocabulary->vocab != o_.vocab) {
        fail(
            "declares PB_SAMPLER_CAP_NEEDS_VOCABULARY: pass SamplerConformanceOptions::vocabulary "
            "with vocab == options.vocab");
        return Object(&d_, nullptr);
      }
      if (!PB_HAS_FIELD(vt_, pb_sampler_vtable, set_vocabulary) || vt_->set_vocabulary == nullptr ||
          !ok(vt_->set_vocabulary(p, o_.vocabulary), "set_vocabulary")) {
        return Object(&d_, nullptr);
      }
    }
    return obj;
  }

 private:
  void fail(const std::string& what) { failures_.push_back(std::string(d_.name) + ": " + what); }
  // Consumes `s`; true when NULL.
  bool ok(pb_status* s, const std::string& call) {
    if (s == nullptr) return true;
    fail(call + " failed: " + host_->status_message(s));
    host_->status_free(s);
    return false;
  }
  bool check_descriptor() {
    const size_t before = failures_.size();
    if (d_.kind != PB_KIND_SAMPLER) fail("kind is not PB_KIND_SAMPLER");
    if (d_.interface_major != PB_SAMPLER_INTERFACE_MAJOR) fail("interface major differs");
    if (vt_ == nullptr) {
      fail("vtable is NULL");
      return false;
    }
    if (vt_->struct_size < sizeof(pb_sampler_vtable)) fail("vtable struct_size too small");
    const bool proc = (vt_->capabilities & PB_SAMPLER_CAP_PROCESSOR) != 0;
    const bool sel = (vt_->capabilities & PB_SAMPLER_CAP_SELECTOR) != 0;
    if (proc == sel) fail("capabilities must hold exactly one of PROCESSOR and SELECTOR");
    if (proc != (vt_->apply != nullptr)) fail("apply must be set exactly for a PROCESSOR");
    if (sel != (vt_->select != nullptr)) fail("select must be set exactly for a SELECTOR");
    if (!vt_->accept || !vt_->reset || !vt_->clone || !d_.create || !d_.destroy)
      fail("accept, reset, clone, create and destroy are required");
    if ((vt_->capabilities & PB_SAMPLER_CAP_NEEDS_VOCABULARY) != 0 &&
        (!PB_HAS_FIELD(vt_, pb_sampler_vtable, set_vocabulary) || vt_->set_vocabulary == nullptr))
      fail("PB_SAMPLER_CAP_NEEDS_VOCABULARY needs set_vocabulary (sampler interface 1.1)");
    return failures_.size() == before;
  }

  // apply() on a copy of `in`; returns the status (caller frees) and the output.
  pb_status* apply(Object& obj, const Input& in, std::vector<float>& out) {
    out = in.logits;
    return vt_->apply(obj.p, out.data(), out.size(), in.history.data(), in.history.size(),
                      in.prompt_len);
  }

  void check_processor() {
    Object obj = create(config_);
    if (obj.p == nullptr) return;
    const std::vector<Input> inputs = make_inputs(o_, 6.0);
    size_t succeeded = 0;
    for (size_t n = 0; n < inputs.size(); ++n) {
      const Input& in = inputs[n];
      const std::string where = "input " + std::to_string(n) + ": ";
      std::vector<float> out;
      if (pb_status* s = apply(obj, in, out)) {
        const pb_status_code code = host_->status_code(s);
        const std::string msg = host_->status_message(s);
        host_->status_free(s);
        if (code == PB_STATUS_INTERNAL || msg.empty())
          fail(where + "apply refused with INTERNAL or without a message: " + msg);
        continue;
      }
      ++succeeded;
      bool had_finite = false, has_finite = false;
      for (size_t i = 0; i < out.size(); ++i) {
        had_finite |= std::isfinite(in.logits[i]);
        has_finite |= std::isfinite(out[i]);
        if (std::isnan(out[i]) || out[i] == INFINITY) {
          fail(where + "apply wrote NaN or +inf at token " + std::to_string(i));
          break;
        }
        if (in.logits[i] == -INFINITY && out[i] != -INFINITY) {
          fail(where + "apply raised removed token " + std::to_string(i));
          break;
        }
      }
      if (had_finite && !has_finite) fail(where + "apply left no finite logit");
      std::vector<float> again;
      if (ok(apply(obj, in, again), "apply (repeat)") && again != out)
        fail(where + "apply is not deterministic");
      void* copy = nullptr;
      if (ok(vt_->clone(obj.p, &copy), "clone")) {
        Object clone(&d_, copy);
        std::vector<float> from_clone;
        if (ok(apply(clone, in, from_clone), "apply on clone") && from_clone != out)
          fail(where + "a clone's apply differs from the original's");
      }
      if (ok(vt_->reset(obj.p), "reset")) {
        std::vector<float> after_reset;
        if (ok(apply(obj, in, after_reset), "apply after reset") && after_reset != out)
          fail(where + "apply after reset differs");
      }
    }
    if (2 * succeeded < inputs.size())
      fail("apply refused " + std::to_string(inputs.size() - succeeded) + " of " +
           std::to_string(inputs.size()) + " valid inputs");
    Input bad = inputs[0];
    bad.logits[1] = NAN;
    std::vector<float> out;
    expect_invalid(apply(obj, bad, out), "apply with a NaN logit");
  }

  void expect_invalid(pb_status* s, const std::string& what) {
    if (s == nullptr) {
      fail(what + " succeeded; expected PB_STATUS_INVALID_ARGUMENT");
      return;
    }
    if (host_->status_code(s) != PB_STATUS_INVALID_ARGUMENT)
      fail(what + ": expected PB_STATUS_INVALID_ARGUMENT, got code " +
           std::to_string(host_->status_code(s)) + " (" + host_->status_message(s) + ")");
    host_->status_free(s);
  }

  // `count` draws on `obj`, each followed by accept(); input k is inputs[(start + k) % n].
  // Records failures for out-of-range ids or ids with a -inf logit; -1 marks a failed draw.
  std::vector<int32_t> draw(Object& obj, const std::vector<Input>& inputs, size_t start,
                            size_t count, const std::string& label) {
    std::vector<int32_t> tokens;
    for (size_t k = 0; k < count; ++k) {
      const Input& in = inputs[(start + k) % inputs.size()];
      int32_t token = -1;
      if (!ok(vt_->select(obj.p, in.logits.data(), in.logits.size(), &token), label + " select")) {
        tokens.push_back(-1);
        continue;
      }
      if (token < 0 || static_cast<size_t>(token) >= in.logits.size()) {
        fail(label + ": select returned " + std::to_string(token) + ", outside [0, vocab)");
        token = -1;
      } else if (!std::isfinite(in.logits[token])) {
        fail(label + ": select returned token " + std::to_string(token) + " whose logit is -inf");
      }
      if (token >= 0) ok(vt_->accept(obj.p, token), label + " accept");
      tokens.push_back(token);
    }
    return tokens;
  }

  void check_selector() {
    // Flat-ish logits (scale 2) so that random selectors really vary between draws.
    const std::vector<Input> inputs = make_inputs(o_, 2.0);
    const size_t n = o_.draws;
    Object a = create(config_);
    Object b = create(config_);
    if (a.p == nullptr || b.p == nullptr) return;
    const std::vector<int32_t> first = draw(a, inputs, 0, n, "object A");
    if (draw(b, inputs, 0, n, "object B") != first)
      fail("two objects created with one config drew different tokens");
    if (ok(vt_->reset(a.p), "reset") && draw(a, inputs, 0, n, "after reset") != first)
      fail("reset() does not repeat the first draws");
    // Clone after n draws; the clone must continue exactly as the original will.
    void* copy = nullptr;
    if (ok(vt_->clone(a.p, &copy), "clone")) {
      Object clone(&d_, copy);
      const std::vector<int32_t> from_clone = draw(clone, inputs, n, n, "clone");
      const std::vector<int32_t> from_original = draw(a, inputs, n, n, "original after clone");
      if (from_clone != from_original)
        fail(
            "a clone does not continue as its original (clone must copy RNG and state into "
            "the copy, and advancing the clone must not touch the original)");
    }
    std::vector<float> removed(o_.vocab, -INFINITY);
    int32_t token = -1;
    expect_invalid(vt_->select(a.p, removed.data(), removed.size(), &token),
                   "select with every logit -inf");
    check_seed(inputs, first);
  }

  // With a `seed` key: seed + 1 must change the draws.
  void check_seed(const std::vector<Input>& inputs, const std::vector<int32_t>& first) {
    size_t seed_index = config_->count;
    for (size_t i = 0; i < config_->count; ++i) {
      const pb_config_value& v = *PB_ARRAY_AT(pb_config_value, config_->values, i);
      if (v.type == PB_TYPE_INT && std::string(v.key) == "seed") seed_index = i;
    }
    if (seed_index == config_->count) return;
    std::vector<pb_config_value> values;
    for (size_t i = 0; i < config_->count; ++i)
      values.push_back(*PB_ARRAY_AT(pb_config_value, config_->values, i));
    values[seed_index].int_value += 1;
    for (pb_config_value& v : values) v.struct_size = sizeof(pb_config_value);
    const pb_config_view other{sizeof(pb_config_view), values.data(), values.size()};
    Object c = create(&other);
    if (c.p != nullptr && draw(c, inputs, 0, o_.draws, "other seed") == first)
      fail("changing `seed` does not change the draws");
  }

  const pb_component_descriptor& d_;
  const pb_config_view* config_;
  const pb_host_api* host_;
  SamplerConformanceOptions o_;
  const pb_sampler_vtable* vt_;
  std::vector<std::string> failures_;
};

}  // namespace sampler_kit_detail

// Runs every check that applies to the component's capabilities on objects made from
// `config` (all keys of its schema, e.g. SamplerConfig::view()). Empty result = conformant.
inline std::vector<std::string> check_sampler_conformance(
    const pb_component_descriptor& descriptor, const pb_config_view* config,
    const pb_host_api* host = sampler_test_host(), const SamplerConformanceOptions& options = {}) {
  return sampler_kit_detail::Checker(descriptor, config, host, options).run();
}

}  // namespace patchbay::testing
