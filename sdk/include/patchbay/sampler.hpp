// Patchbay SDK, header-only C++ layer for samplers (PB_KIND_SAMPLER, patchbay/sampler.h):
// write a plain C++ class, get a pb_component_descriptor.
//
//   class TopP : public patchbay::Sampler {                 // a processor
//    public:
//     static constexpr uint64_t kCapabilities = PB_SAMPLER_CAP_PROCESSOR;
//     TopP(const patchbay::Host& host, const patchbay::ConfigView& config);
//     void apply(std::span<float> logits, std::span<const int32_t> history,
//                size_t prompt_len) override;
//   };
//   class Dist : public patchbay::Sampler {                 // a selector with an RNG
//    public:
//     static constexpr uint64_t kCapabilities = PB_SAMPLER_CAP_SELECTOR | PB_SAMPLER_CAP_STATEFUL;
//     Dist(const patchbay::Host& host, const patchbay::ConfigView& config);
//     int32_t select(std::span<const float> logits) override;
//     void accept(int32_t token) override;                  // optional
//     void reset() override;                                // needed when STATEFUL
//   };
//   inline constexpr pb_config_field kTopPFields[] = {...};
//   inline constexpr pb_component_descriptor kTopP =
//       patchbay::make_sampler_component<TopP>("top_p", "1.0.0", "summary", kTopPFields);
//
// The adapter (detail::SamplerAdapter<T>) fills pb_sampler_vtable: apply only for
// processors, select only for selectors, and clone() as the COPY CONSTRUCTOR of T, so a
// sampler's whole state (RNG, mu, pending draw) must be held by value in members that copy
// deeply (no raw owning pointers, no shared_ptr to mutable state). It checks the pointer and
// length arguments of sampler.h before calling T, and catches every exception at the
// boundary: PluginError keeps its code; anything else becomes PB_STATUS_INTERNAL with what().
//
// Interface 1.1: a class whose kCapabilities holds PB_SAMPLER_CAP_NEEDS_VOCABULARY overrides
// set_vocabulary(const SamplerVocabulary&) and receives the token bytes once, before the
// first apply (the vtable's set_vocabulary is NULL for every other class).
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <type_traits>

#include "patchbay/component.hpp"
#include "patchbay/sampler.h"

namespace patchbay {

// A checked view of pb_sampler_vocabulary (sampler.h, 1.1); valid for the call it is given to.
class SamplerVocabulary {
 public:
  explicit SamplerVocabulary(const pb_sampler_vocabulary& v) : v_(v) {}
  size_t size() const { return v_.vocab; }
  std::string_view bytes(size_t id) const {
    return std::string_view(v_.bytes + v_.offsets[id], v_.offsets[id + 1] - v_.offsets[id]);
  }
  bool end_of_sequence(size_t id) const { return v_.end_of_sequence[id] != 0; }

 private:
  const pb_sampler_vocabulary& v_;
};

// Base class of C++ samplers. Methods may throw (PluginError for a chosen code). One object
// is used by one thread at a time (sampler.h).
class Sampler {
 public:
  // PB_SAMPLER_CAP_* bits; a derived class shadows this constant.
  static constexpr uint64_t kCapabilities = 0;

  virtual ~Sampler() = default;
  // Processor: rewrite logits in place (-inf = removed; never raise a removed token, never
  // write NaN/+inf, leave a finite logit or throw). history = prompt + generated so far, the
  // first prompt_len ids being the prompt.
  virtual void apply(std::span<float> /*logits*/, std::span<const int32_t> /*history*/,
                     size_t /*prompt_len*/) {
    throw PluginError(PB_STATUS_UNSUPPORTED, "apply() is not provided by a selector");
  }
  // Selector: an id in [0, logits.size()) whose logit is finite.
  virtual int32_t select(std::span<const float> /*logits*/) {
    throw PluginError(PB_STATUS_UNSUPPORTED, "select() is not provided by a processor");
  }
  // The token appended to the sequence (once per generated token, after select()).
  virtual void accept(int32_t /*token*/) {}
  // Back to the state right after construction.
  virtual void reset() {}
  // 1.1, PB_SAMPLER_CAP_NEEDS_VOCABULARY only: the token bytes (copy what you keep).
  virtual void set_vocabulary(const SamplerVocabulary& /*vocabulary*/) {
    throw PluginError(PB_STATUS_UNSUPPORTED, "set_vocabulary() is not provided by this sampler");
  }
};

namespace detail {

template <class T>
struct SamplerObject {
  SamplerObject(const pb_host_api* h, const pb_config_view* config)
      : host(h), impl(Host(h), ConfigView(config)) {}
  SamplerObject(const SamplerObject&) = default;  // clone(): a deep copy of impl

  const pb_host_api* host;  // borrowed; outlives the object (component.h)
  T impl;
};

template <class T>
struct SamplerAdapter {
  using Object = SamplerObject<T>;
  static Object* self(void* p) { return static_cast<Object*>(p); }
  static const Object* self(const void* p) { return static_cast<const Object*>(p); }

  static pb_status* create(const pb_host_api* host, const pb_config_view* config,
                           void** out_instance) {
    *out_instance = nullptr;
    return guarded(host, "sampler create", [&] { *out_instance = new Object(host, config); });
  }
  static void destroy(void* instance) { delete self(instance); }

  static pb_status* apply(void* p, float* logits, size_t vocab, const int32_t* history,
                          size_t history_len, size_t prompt_len) {
    Object* o = self(p);
    return guarded(o->host, "sampler apply", [&] {
      if (logits == nullptr || vocab == 0) {
        throw PluginError(PB_STATUS_INVALID_ARGUMENT, "logits must be non-NULL with vocab > 0");
      }
      if (history == nullptr && history_len != 0) {
        throw PluginError(PB_STATUS_INVALID_ARGUMENT, "history is NULL but history_len > 0");
      }
      if (prompt_len > history_len) {
        throw PluginError(PB_STATUS_INVALID_ARGUMENT, "prompt_len " + std::to_string(prompt_len) +
                                                          " exceeds history_len " +
                                                          std::to_string(history_len));
      }
      o->impl.apply(std::span<float>(logits, vocab), std::span<const int32_t>(history, history_len),
                    prompt_len);
    });
  }
  static pb_status* select(void* p, const float* logits, size_t vocab, int32_t* out_token) {
    Object* o = self(p);
    return guarded(o->host, "sampler select", [&] {
      if (logits == nullptr || vocab == 0 || out_token == nullptr) {
        throw PluginError(PB_STATUS_INVALID_ARGUMENT,
                          "logits and out_token must be non-NULL with vocab > 0");
      }
      const int32_t token = o->impl.select(std::span<const float>(logits, vocab));
      if (token < 0 || static_cast<size_t>(token) >= vocab) {
        throw PluginError(PB_STATUS_INTERNAL, "selected id " + std::to_string(token) +
                                                  " lies outside [0, " + std::to_string(vocab) +
                                                  ")");
      }
      *out_token = token;
    });
  }
  static pb_status* accept(void* p, int32_t token) {
    Object* o = self(p);
    return guarded(o->host, "sampler accept", [&] { o->impl.accept(token); });
  }
  static pb_status* reset(void* p) {
    Object* o = self(p);
    return guarded(o->host, "sampler reset", [&] { o->impl.reset(); });
  }
  static pb_status* clone(const void* p, void** out_clone) {
    const Object* o = self(p);
    if (out_clone != nullptr) *out_clone = nullptr;
    return guarded(o->host, "sampler clone", [&] {
      if (out_clone == nullptr) {
        throw PluginError(PB_STATUS_INVALID_ARGUMENT, "out_clone must not be NULL");
      }
      *out_clone = new Object(*o);
    });
  }

  static pb_status* set_vocabulary(void* p, const pb_sampler_vocabulary* v) {
    Object* o = self(p);
    return guarded(o->host, "sampler set_vocabulary", [&] {
      if (v == nullptr || v->struct_size < sizeof(pb_sampler_vocabulary) || v->vocab == 0 ||
          v->offsets == nullptr || v->end_of_sequence == nullptr ||
          (v->bytes == nullptr && v->offsets[v->vocab] != 0)) {
        throw PluginError(PB_STATUS_INVALID_ARGUMENT,
                          "set_vocabulary needs a filled pb_sampler_vocabulary (vocab > 0, "
                          "offsets[vocab + 1], end_of_sequence[vocab])");
      }
      for (size_t i = 0; i < v->vocab; ++i) {
        if (v->offsets[i + 1] < v->offsets[i]) {
          throw PluginError(PB_STATUS_INVALID_ARGUMENT,
                            "set_vocabulary: offsets decrease at id " + std::to_string(i));
        }
      }
      o->impl.set_vocabulary(SamplerVocabulary(*v));
    });
  }

  static constexpr bool kProcessor = (T::kCapabilities & PB_SAMPLER_CAP_PROCESSOR) != 0;
  static constexpr bool kSelector = (T::kCapabilities & PB_SAMPLER_CAP_SELECTOR) != 0;
  static constexpr bool kNeedsVocabulary =
      (T::kCapabilities & PB_SAMPLER_CAP_NEEDS_VOCABULARY) != 0;
  static_assert(kProcessor != kSelector, "a sampler is exactly one of PROCESSOR and SELECTOR");

  static constexpr pb_sampler_vtable kVtable = {sizeof(pb_sampler_vtable),
                                                T::kCapabilities,
                                                kProcessor ? &apply : nullptr,
                                                kSelector ? &select : nullptr,
                                                &accept,
                                                &reset,
                                                &clone,
                                                kNeedsVocabulary ? &set_vocabulary : nullptr};
};

}  // namespace detail

// The component descriptor of sampler class T (derived from patchbay::Sampler, copy-
// constructible, constructible from (const Host&, const ConfigView&)). `fields` must have
// static storage (a namespace-scope constexpr array); the strings must be literals.
template <class T>
constexpr pb_component_descriptor make_sampler_component(
    const char* name, const char* version, const char* summary,
    std::span<const pb_config_field> fields = {}) {
  static_assert(std::is_base_of_v<Sampler, T>, "T must derive from patchbay::Sampler");
  static_assert(std::is_constructible_v<T, const Host&, const ConfigView&>,
                "T needs a constructor T(const patchbay::Host&, const patchbay::ConfigView&)");
  static_assert(std::is_copy_constructible_v<T>,
                "T must be copy-constructible: clone() is T's copy constructor");
  return pb_component_descriptor{sizeof(pb_component_descriptor),
                                 PB_KIND_SAMPLER,
                                 PB_SAMPLER_INTERFACE_MAJOR,
                                 PB_SAMPLER_INTERFACE_MINOR,
                                 name,
                                 version,
                                 summary,
                                 fields.empty() ? nullptr : fields.data(),
                                 fields.size(),
                                 &detail::SamplerAdapter<T>::create,
                                 &detail::SamplerAdapter<T>::destroy,
                                 &detail::SamplerAdapter<T>::kVtable};
}

}  // namespace patchbay
