// SamplerHandle: one PB_KIND_SAMPLER object (a logits processor or a selector) in plain C++,
// and SamplerChain: the ordered chain a generator runs once per generated token
// (patchbay/sampler.h, docs/samplers.md):
//
//   logits = copy of the last position's logits                    float32[vocab]
//   for p in processors (chain order): p.apply(logits, history, prompt_len)
//   token = selector.select(logits)
//   for s in processors + [selector]: s.accept(token)
//
// A chain is zero or more processors followed by exactly one selector, in that order;
// anything else is refused at construction with a message naming the offending entry.
// Every plugin failure becomes patchbay::Error carrying the plugin's message, prefixed by
// "sampler '<name>' (<entry>, <file>): <operation>". What a processor hands back is checked
// against the contract (no NaN or +inf, at least one finite logit left), and a selector's
// token must be in range with a finite logit, so a broken plugin is named instead of
// silently corrupting a generation.
//
// Lifetime: clones made by clone() keep the original's plugin library loaded (they hold the
// original ComponentInstance's keep-alive), and are released with the component's destroy.
// Thread safety: one handle / chain per thread; clones are independent.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "patchbay/sampler.h"
#include "runtime/component_instance.hpp"

namespace patchbay::runtime {

class SamplerHandle {
 public:
  // `instance` must be a PB_KIND_SAMPLER object created with `host`. `label` names the
  // object in messages (e.g. "generate.chain[1]"); `settings` describes its config for
  // describe() (e.g. "k=40").
  SamplerHandle(ComponentInstance instance, const pb_host_api* host, std::string label,
                std::string settings = "");
  SamplerHandle(SamplerHandle&&) noexcept;
  SamplerHandle& operator=(SamplerHandle&&) noexcept;
  ~SamplerHandle();

  bool is_processor() const { return (capabilities() & PB_SAMPLER_CAP_PROCESSOR) != 0; }
  bool is_selector() const { return (capabilities() & PB_SAMPLER_CAP_SELECTOR) != 0; }
  bool is_stateful() const { return (capabilities() & PB_SAMPLER_CAP_STATEFUL) != 0; }
  uint64_t capabilities() const { return vtable_->capabilities; }
  std::string name() const;  // the component's name, "top_k"
  const std::string& label() const { return label_; }
  const std::string& settings() const { return settings_; }

  // Processor: rewrites `logits` in place; `history` = prompt + generated so far, the first
  // `prompt_len` being the prompt. Checks the result against the processor contract.
  void apply(std::span<float> logits, std::span<const int32_t> history, size_t prompt_len);
  // Selector: an id in [0, logits.size()) whose logit is finite.
  int32_t select(std::span<const float> logits);
  void accept(int32_t token);
  void reset();
  // Independent deep copy (same config, RNG state, pending draw).
  SamplerHandle clone() const;
  // Sampler 1.1: the object asked for the token bytes (PB_SAMPLER_CAP_NEEDS_VOCABULARY).
  bool needs_vocabulary() const { return (capabilities() & PB_SAMPLER_CAP_NEEDS_VOCABULARY) != 0; }
  // Hands the vocabulary over when the object takes it (a NULL / absent set_vocabulary:
  // nothing happens); a NEEDS_VOCABULARY object without the entry point is kPluginRefused.
  void set_vocabulary(const pb_sampler_vocabulary& vocabulary);

 private:
  SamplerHandle(std::shared_ptr<const ComponentInstance> root, ComponentInstance own,
                const pb_host_api* host, std::string label, std::string settings);
  std::string context(const std::string& operation) const;

  // The object create() made; shared with clones so its library stays loaded.
  std::shared_ptr<const ComponentInstance> root_;
  // Set for clones only: the cloned object (destroyed with the component's destroy).
  ComponentInstance own_;
  void* object_ = nullptr;  // root_->get() or own_.get()
  const pb_sampler_vtable* vtable_ = nullptr;
  const pb_host_api* host_ = nullptr;
  std::string label_;
  std::string settings_;
};

class SamplerChain {
 public:
  SamplerChain() = default;
  // Checks the shape: at least one entry, processors first, exactly one selector, last.
  // Errors (kInvalidArgument) name the entry (its label and component) and what to do.
  explicit SamplerChain(std::vector<SamplerHandle> entries);
  SamplerChain(SamplerChain&&) noexcept = default;
  SamplerChain& operator=(SamplerChain&&) noexcept = default;

  // Runs the processors on `logits` (in place), in order.
  void apply(std::span<float> logits, std::span<const int32_t> history, size_t prompt_len);
  // The selector's pick on processed logits.
  int32_t select(std::span<const float> logits);
  // Tells every entry (processors, then the selector) that `token` was appended.
  void accept(int32_t token);
  // apply + select + accept on a copy of `logits`: the next token.
  int32_t next(std::span<const float> logits, std::span<const int32_t> history, size_t prompt_len);
  void reset();
  SamplerChain clone() const;
  // Sampler 1.1: some entry needs the token bytes, and handing them to every entry that does.
  bool needs_vocabulary() const;
  void set_vocabulary(const pb_sampler_vocabulary& vocabulary);

  size_t size() const { return entries_.size(); }
  const std::vector<SamplerHandle>& entries() const { return entries_; }
  // "temperature(temperature=0.8) -> top_k(k=40) -> sample(seed=1)"
  std::string describe() const;

 private:
  std::vector<SamplerHandle> entries_;
  std::vector<float> scratch_;  // next()'s copy of the logits
};

}  // namespace patchbay::runtime
