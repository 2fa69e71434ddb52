// SamplerHandle and SamplerChain (see sampler_handle.hpp).
#include "runtime/sampler_handle.hpp"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <utility>

#include "common/error.hpp"
#include "runtime/host_api.hpp"

namespace patchbay::runtime {
namespace {

#if defined(__GNUC__) && !defined(__clang__) && defined(__x86_64__)
#define PATCHBAY_SAMPLER_CHECK_CLONES \
  __attribute__((target_clones("arch=x86-64-v4", "arch=x86-64-v3", "default")))
#else
#define PATCHBAY_SAMPLER_CHECK_CLONES
#endif

struct LogitCounts {
  size_t bad = 0;     // NaN or +inf
  size_t finite = 0;  // neither +-inf nor NaN
};

// One pass without an early exit (it runs after every processor of every token), built for
// AVX-512, AVX2 and the baseline (the loader picks one). 32-bit lane counters, summed per
// block of 2^30 so they cannot wrap: with 64-bit ones the baseline build ran two lanes and a
// widening shuffle per step, ~30 us per pass over GPT-2's 50,257 logits.
PATCHBAY_SAMPLER_CHECK_CLONES LogitCounts count_logits(const float* z, size_t n) {
  constexpr size_t kBlock = size_t{1} << 30;
  LogitCounts counts;
  for (size_t begin = 0; begin < n; begin += kBlock) {
    const size_t end = std::min(n, begin + kBlock);
    uint32_t bad = 0, finite = 0;
    for (size_t i = begin; i < end; ++i) {
      bad += static_cast<uint32_t>((z[i] != z[i]) | (z[i] == INFINITY));
      finite += static_cast<uint32_t>(z[i] - z[i] == 0.0f);  // false for +-inf and NaN
    }
    counts.bad += bad;
    counts.finite += finite;
  }
  return counts;
}

}  // namespace

SamplerHandle::SamplerHandle(ComponentInstance instance, const pb_host_api* host, std::string label,
                             std::string settings)
    : host_(host), label_(std::move(label)), settings_(std::move(settings)) {
  if (!instance || instance.component()->kind != PB_KIND_SAMPLER) {
    throw Error(ErrorKind::kInternal, "SamplerHandle needs a sampler instance (" + label_ + ")");
  }
  vtable_ = static_cast<const pb_sampler_vtable*>(instance.component()->vtable);
  object_ = instance.get();
  root_ = std::make_shared<const ComponentInstance>(std::move(instance));
}

SamplerHandle::SamplerHandle(std::shared_ptr<const ComponentInstance> root, ComponentInstance own,
                             const pb_host_api* host, std::string label, std::string settings)
    : root_(std::move(root)),
      own_(std::move(own)),
      object_(own_.get()),
      vtable_(static_cast<const pb_sampler_vtable*>(root_->component()->vtable)),
      host_(host),
      label_(std::move(label)),
      settings_(std::move(settings)) {}

SamplerHandle::SamplerHandle(SamplerHandle&&) noexcept = default;
SamplerHandle& SamplerHandle::operator=(SamplerHandle&&) noexcept = default;
// own_ (a clone) is destroyed before root_ releases the library: members die in reverse order.
SamplerHandle::~SamplerHandle() = default;

std::string SamplerHandle::name() const { return root_->name(); }

std::string SamplerHandle::context(const std::string& operation) const {
  return "sampler '" + name() + "' (" + label_ + ", " + root_->file().string() + "): " + operation;
}

void SamplerHandle::apply(std::span<float> logits, std::span<const int32_t> history,
                          size_t prompt_len) {
  if (!is_processor()) throw Error(ErrorKind::kInternal, context("apply called on a selector"));
  if (prompt_len > history.size()) {
    throw Error(ErrorKind::kInvalidArgument,
                context("prompt_len " + std::to_string(prompt_len) +
                        " exceeds the history length " + std::to_string(history.size())));
  }
  throw_if_error(
      vtable_->apply(object_, logits.data(), logits.size(),
                     history.empty() ? nullptr : history.data(), history.size(), prompt_len),
      context("apply failed"));
  // The processor contract: no NaN or +inf, at least one finite logit left. The offending id
  // is looked for only when there is one.
  const auto [bad, finite] = count_logits(logits.data(), logits.size());
  for (size_t i = 0; bad > 0 && i < logits.size(); ++i) {
    const float z = logits[i];
    if (std::isnan(z) || z == INFINITY) {
      throw Error(ErrorKind::kPluginRefused,
                  context("apply wrote " + std::string(std::isnan(z) ? "NaN" : "+inf") + " at id " +
                          std::to_string(i) + "; processors may only write finite values or -inf"));
    }
  }
  if (finite == 0 && !logits.empty()) {
    throw Error(
        ErrorKind::kPluginRefused,
        context("apply removed every token (all logits -inf) instead of returning an error"));
  }
}

int32_t SamplerHandle::select(std::span<const float> logits) {
  if (!is_selector()) throw Error(ErrorKind::kInternal, context("select called on a processor"));
  int32_t token = -1;
  throw_if_error(vtable_->select(object_, logits.data(), logits.size(), &token),
                 context("select failed"));
  if (token < 0 || static_cast<size_t>(token) >= logits.size() || !std::isfinite(logits[token])) {
    throw Error(ErrorKind::kPluginRefused,
                context("select returned id " + std::to_string(token) + ", which is outside [0, " +
                        std::to_string(logits.size()) + ") or has a non-finite logit"));
  }
  return token;
}

void SamplerHandle::accept(int32_t token) {
  throw_if_error(vtable_->accept(object_, token),
                 context("accept(" + std::to_string(token) + ") failed"));
}

void SamplerHandle::reset() { throw_if_error(vtable_->reset(object_), context("reset failed")); }

SamplerHandle SamplerHandle::clone() const {
  void* copy = nullptr;
  throw_if_error(vtable_->clone(object_, &copy), context("clone failed"));
  if (copy == nullptr) throw Error(ErrorKind::kPluginRefused, context("clone returned no object"));
  // The clone keeps root_ (and so the library) alive; it is destroyed with the component's destroy.
  ComponentInstance own(std::static_pointer_cast<const void>(root_), root_->component(), copy,
                        root_->file());
  return SamplerHandle(root_, std::move(own), host_, label_, settings_);
}

void SamplerHandle::set_vocabulary(const pb_sampler_vocabulary& vocabulary) {
  const bool has_entry = PB_HAS_FIELD(vtable_, pb_sampler_vtable, set_vocabulary) &&
                         vtable_->set_vocabulary != nullptr;
  if (!has_entry) {
    if (needs_vocabulary()) {
      throw Error(ErrorKind::kPluginRefused,
                  context("declares PB_SAMPLER_CAP_NEEDS_VOCABULARY but has no set_vocabulary"));
    }
    return;
  }
  throw_if_error(vtable_->set_vocabulary(object_, &vocabulary), context("set_vocabulary failed"));
}

// ---- SamplerChain ----

SamplerChain::SamplerChain(std::vector<SamplerHandle> entries) : entries_(std::move(entries)) {
  if (entries_.empty()) {
    throw Error(ErrorKind::kInvalidArgument,
                "sampler chain is empty: it needs exactly one selector (e.g. \"sample\" or "
                "\"greedy\") as its "
                "last entry, optionally preceded by processors");
  }
  for (size_t i = 0; i < entries_.size(); ++i) {
    const SamplerHandle& e = entries_[i];
    const bool last = i + 1 == entries_.size();
    if (e.is_selector() && !last) {
      throw Error(ErrorKind::kInvalidArgument,
                  e.label() + " (name = \"" + e.name() +
                      "\") is a selector but is not the last entry of the chain (" +
                      std::to_string(i + 1) + " of " + std::to_string(entries_.size()) +
                      "): a chain is processors followed by exactly one selector; move it to the "
                      "end or remove it");
    }
    if (!e.is_selector() && last) {
      throw Error(ErrorKind::kInvalidArgument, "sampler chain has no selector: its last entry " +
                                                   e.label() + " (name = \"" + e.name() +
                                                   "\") is a logits processor; end the chain with "
                                                   "a selector such as \"sample\", \"greedy\", "
                                                   "\"mirostat_v1\" or \"mirostat_v2\"");
    }
  }
}

void SamplerChain::apply(std::span<float> logits, std::span<const int32_t> history,
                         size_t prompt_len) {
  for (size_t i = 0; i + 1 < entries_.size(); ++i) entries_[i].apply(logits, history, prompt_len);
}

int32_t SamplerChain::select(std::span<const float> logits) {
  if (entries_.empty()) throw Error(ErrorKind::kInternal, "select on an empty sampler chain");
  return entries_.back().select(logits);
}

void SamplerChain::accept(int32_t token) {
  for (SamplerHandle& e : entries_) e.accept(token);
}

int32_t SamplerChain::next(std::span<const float> logits, std::span<const int32_t> history,
                           size_t prompt_len) {
  scratch_.assign(logits.begin(), logits.end());
  apply(scratch_, history, prompt_len);
  const int32_t token = select(scratch_);
  accept(token);
  return token;
}

void SamplerChain::reset() {
  for (SamplerHandle& e : entries_) e.reset();
}

SamplerChain SamplerChain::clone() const {
  std::vector<SamplerHandle> copies;
  copies.reserve(entries_.size());
  for (const SamplerHandle& e : entries_) copies.push_back(e.clone());
  return SamplerChain(std::move(copies));
}

bool SamplerChain::needs_vocabulary() const {
  for (const SamplerHandle& e : entries_) {
    if (e.needs_vocabulary()) return true;
  }
  return false;
}

void SamplerChain::set_vocabulary(const pb_sampler_vocabulary& vocabulary) {
  for (SamplerHandle& e : entries_) e.set_vocabulary(vocabulary);
}

std::string SamplerChain::describe() const {
  std::string out;
  for (const SamplerHandle& e : entries_) {
    if (!out.empty()) out += " -> ";
    out += e.name() + "(" + e.settings() + ")";
  }
  return out;
}

}  // namespace patchbay::runtime
