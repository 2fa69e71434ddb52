// Patchbay SDK conformance kit for attention layers (PB_KIND_ATTENTION), header-only, doctest.
//
// Every attention plugin, built-in or third-party, runs the same checks against its C ABI
// (pb_attention_vtable), through the host's ops table, so what passes here is what the host
// relies on:
//   - parameters: at least one; names non-empty and unique; tensors float leaves with
//     requires_grad (except the options' non_trainable_parameters, which must not), finite;
//     equal seeds give equal values, different seeds different ones;
//     an index past the end is PB_STATUS_OUT_OF_RANGE;
//   - forward maps [B, T, C] to [B, T, C], finite, deterministic;
//   - causality (CAP_CAUSAL, causal context): perturbing tokens t+1.. leaves the outputs at
//     positions <= t unchanged, and changes the output at t+1 (so the check can fail);
//   - incremental decoding (cache_kind != NONE): prefill then one token at a time, and
//     chunks of several tokens, give the whole-sequence forward's outputs within
//     `decode_tolerance`; state_length counts the positions; a step past the capacity is
//     PB_STATUS_OUT_OF_RANGE and a wrong batch or width is refused;
//   - beam reordering (state_reorder, interface 1.1, when the layer has it): after a prefill,
//     reordering the sequences (one forked, one dropped) then decoding more tokens gives what
//     re-running each beam's prompt in a fresh state gives, within `decode_tolerance`; the
//     length is unchanged and a wrong count or source is refused. A layer without it passes
//     with a note (the host then re-runs the prompt per beam, slower); set
//     `state_reorder_required` to make its absence a failure;
//   - shared prefixes (state_fork, interface 1.4, when the layer has it): a prefilled state
//     forked into more sequences (one source repeated) decodes each copy as a fresh state that
//     prefilled its source's prompt, within `decode_tolerance`; the source state is unchanged;
//     a source out of range and zero sources are refused. A layer without it passes with a note
//     (`state_fork_required` makes that a failure);
//   - gradients of forward with respect to x and every parameter match central finite
//     differences (patchbay/testing/gradcheck.hpp) on a tiny f32 configuration;
//   - cross-attention (interface 1.3): a layer declaring PB_ATTENTION_CAP_CROSS passes the
//     checks of attention_cross_conformance.hpp (padded keys never attended, bit for bit; a
//     per-query naive reference; memory reuse; gradients; refusals); one without it leaves
//     the cross-attention functions NULL;
//   - refusals at init: a causal context for a layer without CAP_CAUSAL (the "non-causal
//     attention in a causal LM" message), rotary without CAP_ROTARY, d_model not a multiple
//     of n_heads — all PB_STATUS_INVALID_ARGUMENT with a message.
// Rotary positions are exercised too when the layer declares CAP_ROTARY.
//
// The kit needs a host with the tensor engine (pb_host_api::ops): attention layers compute
// with it. Use (needs only sdk headers, doctest and such a host):
//
//   #include <patchbay/testing/attention_conformance.hpp>
//   namespace pt = patchbay::testing;
//   TEST_CASE("my attention conforms") {
//     pt::ConfigBuilder config(my::kMyAttention, {{"window", 32}});  // schema defaults + overrides
//     pt::AttentionFactory make = [&] {      // a fresh, un-initialised object on every call
//       void* object = ...;                 // descriptor->create(host, config.view(), &object)
//       return pt::AttentionUnderTest(vtable, object, host, [=] { descriptor->destroy(object); });
//     };
//     pt::check_attention_conformance(make, pt::AttentionConformanceOptions{});
//   }
#pragma once

#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <functional>
#include <memory>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "patchbay/attention.h"
#include "patchbay/tensor.hpp"
#include "patchbay/testing/config_builder.hpp"
#include "patchbay/testing/gradcheck.hpp"

namespace patchbay::testing {

// One attention object under test. Move-only; `release` destroys the object (and whatever
// keeps its code loaded) when the handle dies.
class AttentionUnderTest {
 public:
  AttentionUnderTest() = default;
  AttentionUnderTest(const pb_attention_vtable* vtable, void* instance, const pb_host_api* host,
                     std::function<void()> release)
      : vtable_(vtable), instance_(instance), host_(host), release_(std::move(release)) {}
  ~AttentionUnderTest() {
    if (release_) release_();
  }
  AttentionUnderTest(AttentionUnderTest&& o) noexcept { *this = std::move(o); }
  AttentionUnderTest& operator=(AttentionUnderTest&& o) noexcept {
    if (this != &o) {
      if (release_) release_();
      vtable_ = std::exchange(o.vtable_, nullptr);
      instance_ = std::exchange(o.instance_, nullptr);
      host_ = std::exchange(o.host_, nullptr);
      release_ = std::exchange(o.release_, nullptr);
    }
    return *this;
  }

  const pb_attention_vtable* vtable() const { return vtable_; }
  void* instance() const { return instance_; }
  const pb_host_api* host() const { return host_; }
  const pb_ops_table* ops() const { return host_->ops; }
  bool has(uint64_t capability) const { return (vtable_->capabilities & capability) != 0; }
  bool has_cache() const { return vtable_->cache_kind != PB_ATTENTION_CACHE_NONE; }

  void init(const pb_layer_context& ctx) { expect_ok(vtable_->init(instance_, &ctx), "init"); }
  std::vector<std::pair<std::string, Tensor>> parameters() const {
    std::vector<std::pair<std::string, Tensor>> out;
    const size_t count = vtable_->parameter_count(instance_);
    for (size_t i = 0; i < count; ++i) {
      const char* name = nullptr;
      pb_tensor* tensor = nullptr;
      expect_ok(vtable_->parameter(instance_, i, &name, &tensor), "parameter");
      REQUIRE(name != nullptr);
      REQUIRE(tensor != nullptr);
      ops()->retain(tensor);  // borrowed from the layer; the Tensor holds its own reference
      out.emplace_back(name, Tensor(ops(), tensor));
    }
    return out;
  }
  Tensor forward(const Tensor& x, bool training = false) const {
    pb_tensor* y = nullptr;
    expect_ok(vtable_->forward(instance_, x.handle(), training ? 1 : 0, &y), "forward");
    REQUIRE(y != nullptr);
    return Tensor(ops(), y);
  }

  // A decoding state, destroyed with its handle. It points at this AttentionUnderTest: do not
  // move or destroy the layer while a State lives.
  class State {
   public:
    State(const AttentionUnderTest* owner, void* state) : owner_(owner), state_(state) {}
    ~State() {
      if (state_ != nullptr) owner_->vtable_->state_destroy(owner_->instance_, state_);
    }
    State(const State&) = delete;
    State& operator=(const State&) = delete;
    void* get() const { return state_; }
    int64_t length() const { return owner_->vtable_->state_length(owner_->instance_, state_); }

   private:
    const AttentionUnderTest* owner_;
    void* state_;
  };
  std::unique_ptr<State> state_create(int64_t batch, int64_t capacity) const {
    void* state = nullptr;
    expect_ok(vtable_->state_create(instance_, batch, capacity, &state), "state_create");
    REQUIRE(state != nullptr);
    return std::make_unique<State>(this, state);
  }
  Tensor forward_step(const State& state, const Tensor& x) const {
    pb_tensor* y = nullptr;
    expect_ok(vtable_->forward_step(instance_, state.get(), x.handle(), &y), "forward_step");
    REQUIRE(y != nullptr);
    return Tensor(ops(), y);
  }

  // Cross-attention (interface 1.3). The memory object is released with
  // vtable()->cross_memory_destroy; cross() does create, forward_cross, destroy in one call.
  void* cross_memory_create(const Tensor& memory, const Tensor* mask) const {
    void* made = nullptr;
    expect_ok(vtable_->cross_memory_create(instance_, memory.handle(),
                                           mask != nullptr ? mask->handle() : nullptr, 0, &made),
              "cross_memory_create");
    REQUIRE(made != nullptr);
    return made;
  }
  Tensor forward_cross(const Tensor& x, const void* memory, bool training = false) const {
    pb_tensor* y = nullptr;
    expect_ok(vtable_->forward_cross(instance_, x.handle(), memory, training ? 1 : 0, &y),
              "forward_cross");
    REQUIRE(y != nullptr);
    return Tensor(ops(), y);
  }
  Tensor cross(const Tensor& x, const Tensor& memory, const Tensor* mask) const {
    void* made = cross_memory_create(memory, mask);
    pb_tensor* y = nullptr;
    pb_status* st = vtable_->forward_cross(instance_, x.handle(), made, 0, &y);
    vtable_->cross_memory_destroy(instance_, made);
    expect_ok(st, "forward_cross");
    REQUIRE(y != nullptr);
    return Tensor(ops(), y);
  }

  // The status code of a call expected to fail (the status is released; its message must
  // not be empty). PB_STATUS_OK when it did not fail.
  pb_status_code code_of(pb_status* st) const {
    if (st == nullptr) return PB_STATUS_OK;
    const pb_status_code code = host_->status_code(st);
    const char* message = host_->status_message(st);
    CHECK_MESSAGE((message != nullptr && message[0] != '\0'),
                  "a failing call returned a status without a message");
    host_->status_free(st);
    return code;
  }

 private:
  void expect_ok(pb_status* st, const char* operation) const {
    if (st == nullptr) return;
    const std::string message = host_->status_message(st) ? host_->status_message(st) : "";
    const int code = static_cast<int>(host_->status_code(st));
    host_->status_free(st);
    FAIL(operation << " failed with status " << code << ": " << message);
  }

  const pb_attention_vtable* vtable_ = nullptr;
  void* instance_ = nullptr;
  const pb_host_api* host_ = nullptr;
  std::function<void()> release_;
};

// Returns a fresh, un-initialised object with the configuration under test on every call.
using AttentionFactory = std::function<AttentionUnderTest()>;

struct AttentionConformanceOptions {
  // Shape of the main checks: x [batch, seq_len, d_model].
  int64_t batch = 2;
  int64_t seq_len = 12;
  int64_t d_model = 16;
  int64_t n_heads = 2;
  // Prefill length of the incremental check, then 1 token per step; a second run uses
  // chunks of decode_chunk tokens.
  int64_t prefill = 5;
  int64_t decode_chunk = 3;
  // Larger than GPT-2's 0.02 so the attention pattern is far from uniform and a wrong mask
  // or cache shows up clearly.
  double init_std = 0.3;
  double decode_tolerance = 1e-4;     // max |incremental - full|
  double causality_tolerance = 1e-6;  // max change at positions <= t
  uint64_t seed = 1234;
  // Tiny configuration of the finite-difference check (each element is perturbed twice).
  int64_t grad_seq_len = 4;
  int64_t grad_d_model = 8;
  int64_t grad_n_heads = 2;
  GradcheckOptions gradcheck;
  // The causality check also asserts that perturbing token t+1 changes its own output (so the
  // check is not vacuous). false for layers whose query does not see its own key while another
  // key is visible (Reformer shared-QK attention): token 1 then attends to token 0 alone and
  // its output does not depend on itself. The leak assertion itself always runs.
  bool perturbed_token_output_must_change = true;
  // Parameters that are state saved with the checkpoint but not trained (Performer's random
  // features): they must NOT require gradients (the optimizer then skips them) and the
  // finite-difference check leaves them out. Every other parameter must require gradients.
  std::vector<std::string> non_trainable_parameters;
  // Fail (rather than note) when a layer with a decoding cache has no state_reorder.
  bool state_reorder_required = false;
  // Fail (rather than note) when a layer with a decoding cache has no state_fork (or answers
  // UNSUPPORTED): for built-in kinds that promise shared-context evaluation.
  bool state_fork_required = false;
  // Cross-attention checks (PB_ATTENTION_CAP_CROSS): decoder and encoder lengths (different,
  // the encoder's >= 4 for its padding pattern) and the tolerance against the per-query
  // reference and between chunked and whole calls.
  int64_t cross_query_len = 5;
  int64_t cross_memory_len = 7;
  double cross_tolerance = 1e-5;
  // The configuration under test declares the capability but refuses cross-attention for a
  // reason of its own (dense with a sliding window): then only that refusal is checked
  // (PB_STATUS_INVALID_ARGUMENT with a message).
  bool cross_refused_by_configuration = false;
  // Optional plugin-specific naive reference of cross-attention: from the layer's parameters
  // (as parameters() lists them), x [B, Tq, C], memory [B, Tk, C] and valid [B * Tk] (1
  // attended, 0 padding), the expected output [B, Tq, C].
  std::function<Tensor(const std::vector<std::pair<std::string, Tensor>>& parameters,
                       const Tensor& x, const Tensor& memory, const std::vector<uint8_t>& valid)>
      cross_reference;
};

namespace attention_kit_detail {

inline pb_layer_context layer_context(const AttentionConformanceOptions& o, int64_t d_model,
                                      int64_t n_heads, int64_t max_seq_len, bool causal,
                                      pb_positional_kind positional, uint64_t seed) {
  pb_layer_context ctx{};
  ctx.struct_size = sizeof(pb_layer_context);
  ctx.d_model = d_model;
  ctx.n_heads = n_heads;
  ctx.d_ff = 4 * d_model;
  ctx.max_seq_len = max_seq_len;
  ctx.layer_index = 0;
  ctx.n_layers = 1;
  ctx.causal = causal ? 1 : 0;
  ctx.positional = positional;
  ctx.rope_theta = 10000.0;
  ctx.init_std = o.init_std;
  ctx.residual_init_std = o.init_std;
  ctx.seed = seed;
  ctx.param_dtype = PB_DTYPE_F32;
  ctx.device_type = PB_DEVICE_CPU;
  ctx.device_index = 0;
  return ctx;
}

inline double max_abs_diff(const std::vector<float>& a, const std::vector<float>& b) {
  REQUIRE(a.size() == b.size());
  double worst = 0;
  for (size_t i = 0; i < a.size(); ++i) {
    const double d = std::fabs(static_cast<double>(a[i]) - b[i]);
    if (!(d <= worst)) worst = std::isnan(d) ? INFINITY : d;
  }
  return worst;
}

inline bool all_finite(const std::vector<float>& v) {
  for (float x : v)
    if (!std::isfinite(x)) return false;
  return true;
}

// The positional encodings to run the checks under: none, and rotary / ALiBi when declared.
inline std::vector<pb_positional_kind> positionals(const AttentionUnderTest& layer) {
  std::vector<pb_positional_kind> out = {PB_POSITIONAL_NONE};
  if (layer.has(PB_ATTENTION_CAP_ROTARY)) out.push_back(PB_POSITIONAL_ROTARY);
  if (layer.has(PB_ATTENTION_CAP_ALIBI)) out.push_back(PB_POSITIONAL_ALIBI);
  return out;
}

inline std::string positional_name(pb_positional_kind kind) {
  return kind == PB_POSITIONAL_ROTARY ? "rotary" : kind == PB_POSITIONAL_ALIBI ? "alibi" : "none";
}

// A causal (when possible) layer initialised for the main checks.
inline AttentionUnderTest ready_layer(const AttentionFactory& make,
                                      const AttentionConformanceOptions& o,
                                      pb_positional_kind positional, uint64_t seed) {
  AttentionUnderTest layer = make();
  REQUIRE(layer.vtable() != nullptr);
  REQUIRE(layer.instance() != nullptr);
  REQUIRE(layer.ops() != nullptr);
  REQUIRE(layer.vtable()->struct_size >= sizeof(pb_attention_vtable));
  layer.init(layer_context(o, o.d_model, o.n_heads, o.seq_len, layer.has(PB_ATTENTION_CAP_CAUSAL),
                           positional, seed));
  return layer;
}

// Runs `steps` (chunk lengths summing to seq_len) through one state; returns the outputs
// concatenated along T.
inline Tensor decode_in_chunks(const AttentionUnderTest& layer, const Tensor& x,
                               const std::vector<int64_t>& steps) {
  const int64_t batch = x.size(0), total = x.size(1);
  std::unique_ptr<AttentionUnderTest::State> state = layer.state_create(batch, total);
  CHECK(state->length() == 0);
  std::vector<Tensor> outputs;
  int64_t at = 0;
  for (int64_t n : steps) {
    Tensor y = layer.forward_step(*state, x.slice(1, at, at + n));
    CHECK(y.shape() == std::vector<int64_t>{batch, n, x.size(2)});
    outputs.push_back(y);
    at += n;
    CHECK(state->length() == at);
  }
  return Ops(layer.ops()).concat(outputs, 1);
}

// The decoding outputs of `next` [B, Tn, C] after a prefill of `prompt` [B, P, C] in a fresh
// state of `capacity` positions.
inline Tensor prefill_then_step(const AttentionUnderTest& layer, const Tensor& prompt,
                                const Tensor& next, int64_t capacity) {
  std::unique_ptr<AttentionUnderTest::State> state = layer.state_create(prompt.size(0), capacity);
  layer.forward_step(*state, prompt);
  return layer.forward_step(*state, next);
}

// Three sequences prefilled, reordered to {2, 0, 0} (sequence 1 dropped, 0 forked), then two
// more tokens per beam: each beam's outputs must equal a fresh state's that prefilled its
// source's prompt and decoded the same tokens (what the host does without state_reorder).
inline void check_state_reorder(const AttentionFactory& make,
                                const AttentionConformanceOptions& o) {
  AttentionUnderTest layer = ready_layer(make, o, PB_POSITIONAL_NONE, o.seed);
  const pb_attention_vtable* vt = layer.vtable();
  const bool present =
      PB_HAS_FIELD(vt, pb_attention_vtable, state_reorder) && vt->state_reorder != nullptr;
  if (!present) {
    if (o.state_reorder_required)
      FAIL(
          "the layer has no state_reorder (attention interface 1.1): beam search re-runs the "
          "prompt for every beam");
    MESSAGE(
        "note: no state_reorder (attention interface 1.1); beam search will re-run the prompt "
        "per beam (correct, slower). Override AttentionState::reorder to provide it.");
    return;
  }
  NoGradGuard no_grad(layer.ops());
  Ops ops(layer.ops());
  const int64_t beams = 3, prompt_len = std::min<int64_t>(o.prefill, o.seq_len - 2), extra = 2;
  Generator g(layer.ops(), o.seed + 31);
  const Tensor prompt = ops.uniform({beams, prompt_len, o.d_model}, g, -1.0, 1.0);
  const Tensor next = ops.uniform({beams, extra, o.d_model}, g, -1.0, 1.0);
  std::unique_ptr<AttentionUnderTest::State> state = layer.state_create(beams, o.seq_len);
  layer.forward_step(*state, prompt);
  const std::vector<int64_t> source = {2, 0, 0};
  pb_status* st = vt->state_reorder(layer.instance(), state->get(), source.data(), beams);
  if (st != nullptr && layer.host()->status_code(st) == PB_STATUS_UNSUPPORTED &&
      !o.state_reorder_required) {
    layer.code_of(st);
    MESSAGE(
        "note: state_reorder answers UNSUPPORTED; beam search will re-run the prompt per "
        "beam (correct, slower)");
    return;
  }
  REQUIRE_MESSAGE(layer.code_of(st) == PB_STATUS_OK, "state_reorder failed");
  CHECK(state->length() == prompt_len);
  const std::vector<float> reordered = layer.forward_step(*state, next).to_vector();
  CHECK(state->length() == prompt_len + extra);
  const size_t per_beam = static_cast<size_t>(extra * o.d_model);
  for (int64_t i = 0; i < beams; ++i) {
    CAPTURE(i);
    const int64_t s = source[static_cast<size_t>(i)];
    const std::vector<float> expected =
        prefill_then_step(layer, prompt.slice(0, s, s + 1), next.slice(0, i, i + 1), o.seq_len)
            .to_vector();
    const std::vector<float> got(
        reordered.begin() + static_cast<std::ptrdiff_t>(i * per_beam),
        reordered.begin() + static_cast<std::ptrdiff_t>((i + 1) * per_beam));
    CHECK(max_abs_diff(got, expected) <= o.decode_tolerance);
  }
  // The check can fail: the dropped sequence's prompt gives other outputs than beam 0's.
  const std::vector<float> dropped =
      prefill_then_step(layer, prompt.slice(0, 1, 2), next.slice(0, 0, 1), o.seq_len).to_vector();
  CHECK(max_abs_diff(std::vector<float>(reordered.begin(),
                                        reordered.begin() + static_cast<std::ptrdiff_t>(per_beam)),
                     dropped) > 10 * o.decode_tolerance);
  // Refusals: a count other than the batch, a source out of range; the state is kept.
  const std::vector<int64_t> short_source = {0, 1};
  CHECK(layer.code_of(vt->state_reorder(layer.instance(), state->get(), short_source.data(), 2)) !=
        PB_STATUS_OK);
  const std::vector<int64_t> out_of_range = {0, 3, 1};
  CHECK(layer.code_of(vt->state_reorder(layer.instance(), state->get(), out_of_range.data(),
                                        beams)) != PB_STATUS_OK);
  CHECK(state->length() == prompt_len + extra);
}

// Shared prefixes (state_fork, interface 1.4): two sequences prefilled, forked into {1, 0, 1}
// (a new state; the source untouched), then two more tokens per copy: each copy's outputs must
// equal a fresh state's that prefilled its source's prompt, and the source state must still
// decode as if never forked. A layer without it passes with a note (the host then prefills a
// shared context once per continuation).
inline void check_state_fork(const AttentionFactory& make, const AttentionConformanceOptions& o) {
  AttentionUnderTest layer = ready_layer(make, o, PB_POSITIONAL_NONE, o.seed);
  const pb_attention_vtable* vt = layer.vtable();
  if (!PB_HAS_FIELD(vt, pb_attention_vtable, state_fork) || vt->state_fork == nullptr) {
    if (o.state_fork_required)
      FAIL(
          "the layer has no state_fork (attention interface 1.4): evaluation prefills a shared "
          "context once per continuation");
    MESSAGE(
        "note: no state_fork (attention interface 1.4); evaluation will prefill a shared context "
        "once per continuation (correct, slower). Override AttentionState::fork to provide it.");
    return;
  }
  NoGradGuard no_grad(layer.ops());
  Ops ops(layer.ops());
  const int64_t sources = 2, copies = 3, extra = 2;
  const int64_t prompt_len = std::min<int64_t>(o.prefill, o.seq_len - extra);
  Generator g(layer.ops(), o.seed + 37);
  const Tensor prompt = ops.uniform({sources, prompt_len, o.d_model}, g, -1.0, 1.0);
  const Tensor next = ops.uniform({copies, extra, o.d_model}, g, -1.0, 1.0);
  std::unique_ptr<AttentionUnderTest::State> state = layer.state_create(sources, o.seq_len);
  layer.forward_step(*state, prompt);
  const std::vector<int64_t> source = {1, 0, 1};
  void* forked = nullptr;
  pb_status* st = vt->state_fork(layer.instance(), state->get(), source.data(), copies, &forked);
  if (st != nullptr && layer.host()->status_code(st) == PB_STATUS_UNSUPPORTED) {
    layer.code_of(st);
    if (o.state_fork_required) FAIL("state_fork answers UNSUPPORTED though it is required");
    MESSAGE("note: state_fork answers UNSUPPORTED; evaluation will prefill shared contexts again");
    return;
  }
  REQUIRE_MESSAGE(layer.code_of(st) == PB_STATUS_OK, "state_fork failed");
  REQUIRE(forked != nullptr);
  const AttentionUnderTest::State copy(&layer, forked);
  CHECK(copy.length() == prompt_len);
  const std::vector<float> got = layer.forward_step(copy, next).to_vector();
  CHECK(copy.length() == prompt_len + extra);
  CHECK(state->length() == prompt_len);  // the source is not advanced by its copy
  const size_t per_copy = static_cast<size_t>(extra * o.d_model);
  for (int64_t i = 0; i < copies; ++i) {
    CAPTURE(i);
    const int64_t s = source[static_cast<size_t>(i)];
    const std::vector<float> expected =
        prefill_then_step(layer, prompt.slice(0, s, s + 1), next.slice(0, i, i + 1), o.seq_len)
            .to_vector();
    CHECK(max_abs_diff(
              std::vector<float>(got.begin() + static_cast<std::ptrdiff_t>(i * per_copy),
                                 got.begin() + static_cast<std::ptrdiff_t>((i + 1) * per_copy)),
              expected) <= o.decode_tolerance);
  }
  // The check can fail: copy 1 (source 0) differs from what source 1's prompt gives.
  const std::vector<float> other =
      prefill_then_step(layer, prompt.slice(0, 1, 2), next.slice(0, 1, 2), o.seq_len).to_vector();
  CHECK(max_abs_diff(std::vector<float>(got.begin() + static_cast<std::ptrdiff_t>(per_copy),
                                        got.begin() + static_cast<std::ptrdiff_t>(2 * per_copy)),
                     other) > 10 * o.decode_tolerance);
  // The source still decodes its own sequences as if never forked.
  const std::vector<float> source_next =
      layer.forward_step(*state, next.slice(0, 0, sources)).to_vector();
  const std::vector<float> source_expected =
      prefill_then_step(layer, prompt, next.slice(0, 0, sources), o.seq_len).to_vector();
  CHECK(max_abs_diff(source_next, source_expected) <= o.decode_tolerance);
  // Refusals: a source out of range, no sources.
  void* refused = nullptr;
  const std::vector<int64_t> out_of_range = {0, 2};
  CHECK(layer.code_of(vt->state_fork(layer.instance(), state->get(), out_of_range.data(), 2,
                                     &refused)) != PB_STATUS_OK);
  CHECK(layer.code_of(vt->state_fork(layer.instance(), state->get(), source.data(), 0, &refused)) !=
        PB_STATUS_OK);
  CHECK(refused == nullptr);
}

}  // namespace attention_kit_detail

// The cross-attention checks (attention_cross_conformance.hpp, included at the end).
inline void check_cross_attention_conformance(const AttentionFactory& make,
                                              const AttentionConformanceOptions& o);

// Runs every check as a doctest SUBCASE of the calling TEST_CASE.
inline void check_attention_conformance(const AttentionFactory& make,
                                        const AttentionConformanceOptions& o) {
  namespace detail = attention_kit_detail;
  using detail::max_abs_diff;
  AttentionUnderTest probe = make();
  REQUIRE(probe.ops() != nullptr);
  const bool causal = probe.has(PB_ATTENTION_CAP_CAUSAL);
  const std::vector<pb_positional_kind> positionals = detail::positionals(probe);
  Ops ops(probe.ops());
  Generator input_generator(probe.ops(), o.seed);
  const Tensor x = ops.uniform({o.batch, o.seq_len, o.d_model}, input_generator, -1.0, 1.0);

  SUBCASE("parameters are named, unique, float leaves with gradients, seeded") {
    AttentionUnderTest layer = detail::ready_layer(make, o, PB_POSITIONAL_NONE, o.seed);
    const auto params = layer.parameters();
    REQUIRE(!params.empty());
    std::set<std::string> names;
    for (const auto& [name, tensor] : params) {
      CAPTURE(name);
      CHECK(!name.empty());
      CHECK(names.insert(name).second);
      const bool trainable =
          std::find(o.non_trainable_parameters.begin(), o.non_trainable_parameters.end(), name) ==
          o.non_trainable_parameters.end();
      CHECK(tensor.requires_grad() == trainable);
      CHECK(tensor.dtype() == PB_DTYPE_F32);
      CHECK(tensor.numel() > 0);
      CHECK(detail::all_finite(tensor.to_vector()));
    }
    const char* name = nullptr;
    pb_tensor* tensor = nullptr;
    CHECK(layer.code_of(layer.vtable()->parameter(layer.instance(), params.size(), &name,
                                                  &tensor)) == PB_STATUS_OUT_OF_RANGE);
    AttentionUnderTest same = detail::ready_layer(make, o, PB_POSITIONAL_NONE, o.seed);
    AttentionUnderTest other = detail::ready_layer(make, o, PB_POSITIONAL_NONE, o.seed + 1);
    const auto same_params = same.parameters(), other_params = other.parameters();
    REQUIRE(same_params.size() == params.size());
    REQUIRE(other_params.size() == params.size());
    double seed_difference = 0;
    for (size_t i = 0; i < params.size(); ++i) {
      CHECK(same_params[i].first == params[i].first);
      CHECK(max_abs_diff(same_params[i].second.to_vector(), params[i].second.to_vector()) == 0.0);
      seed_difference +=
          max_abs_diff(other_params[i].second.to_vector(), params[i].second.to_vector());
    }
    CHECK_MESSAGE(seed_difference > 0.0, "a different seed gave identical parameters");
  }

  SUBCASE("forward maps [B, T, C] to [B, T, C], finite and deterministic") {
    for (pb_positional_kind positional : positionals) {
      const std::string positional_text = detail::positional_name(positional);
      CAPTURE(positional_text);
      AttentionUnderTest layer = detail::ready_layer(make, o, positional, o.seed);
      NoGradGuard no_grad(layer.ops());
      const Tensor y = layer.forward(x);
      CHECK(y.shape() == x.shape());
      CHECK(detail::all_finite(y.to_vector()));
      CHECK(max_abs_diff(layer.forward(x).to_vector(), y.to_vector()) == 0.0);
      const Tensor short_x = x.slice(1, 0, 3);
      CHECK(layer.forward(short_x).shape() == short_x.shape());
      const Tensor wrong_width = ops.zeros({o.batch, 3, o.d_model + 1});
      pb_tensor* out = nullptr;
      CHECK(layer.code_of(layer.vtable()->forward(layer.instance(), wrong_width.handle(), 0,
                                                  &out)) != PB_STATUS_OK);
    }
  }

  if (causal) {
    SUBCASE("causality: perturbing tokens after t leaves outputs at <= t unchanged") {
      for (pb_positional_kind positional : positionals) {
        const std::string positional_text = detail::positional_name(positional);
        CAPTURE(positional_text);
        AttentionUnderTest layer = detail::ready_layer(make, o, positional, o.seed);
        NoGradGuard no_grad(layer.ops());
        const Tensor y = layer.forward(x);
        for (int64_t t : {int64_t{0}, o.seq_len / 2, o.seq_len - 2}) {
          CAPTURE(t);
          Generator noise_generator(layer.ops(), o.seed + 100 + static_cast<uint64_t>(t));
          const Tensor noise =
              ops.uniform({o.batch, o.seq_len - t - 1, o.d_model}, noise_generator, -2.0, 2.0);
          const Tensor perturbed =
              ops.concat({x.slice(1, 0, t + 1), x.slice(1, t + 1, o.seq_len) + noise}, 1);
          const Tensor y2 = layer.forward(perturbed);
          CHECK(max_abs_diff(y2.slice(1, 0, t + 1).to_vector(), y.slice(1, 0, t + 1).to_vector()) <=
                o.causality_tolerance);
          if (o.perturbed_token_output_must_change)
            CHECK_MESSAGE(max_abs_diff(y2.slice(1, t + 1, t + 2).to_vector(),
                                       y.slice(1, t + 1, t + 2).to_vector()) > 1e-4,
                          "perturbing token " << t + 1 << " did not change its own output");
        }
      }
    }
  }

  if (causal && probe.has_cache()) {
    SUBCASE("incremental decoding equals the whole-sequence forward") {
      for (pb_positional_kind positional : positionals) {
        const std::string positional_text = detail::positional_name(positional);
        CAPTURE(positional_text);
        AttentionUnderTest layer = detail::ready_layer(make, o, positional, o.seed);
        NoGradGuard no_grad(layer.ops());
        const std::vector<float> full = layer.forward(x).to_vector();
        std::vector<int64_t> one_by_one = {o.prefill};
        for (int64_t t = o.prefill; t < o.seq_len; ++t) one_by_one.push_back(1);
        CHECK(max_abs_diff(detail::decode_in_chunks(layer, x, one_by_one).to_vector(), full) <=
              o.decode_tolerance);
        std::vector<int64_t> chunks;
        for (int64_t t = 0; t < o.seq_len; t += o.decode_chunk)
          chunks.push_back(std::min(o.decode_chunk, o.seq_len - t));
        CHECK(max_abs_diff(detail::decode_in_chunks(layer, x, chunks).to_vector(), full) <=
              o.decode_tolerance);
        CHECK(max_abs_diff(detail::decode_in_chunks(layer, x, {o.seq_len}).to_vector(), full) <=
              o.decode_tolerance);
      }
    }

    SUBCASE("decoding refuses a step past the capacity, a wrong batch or width") {
      AttentionUnderTest layer = detail::ready_layer(make, o, PB_POSITIONAL_NONE, o.seed);
      NoGradGuard no_grad(layer.ops());
      std::unique_ptr<AttentionUnderTest::State> state = layer.state_create(o.batch, 4);
      layer.forward_step(*state, x.slice(1, 0, 3));
      pb_tensor* out = nullptr;
      const Tensor two = x.slice(1, 3, 5);
      CHECK(layer.code_of(layer.vtable()->forward_step(layer.instance(), state->get(), two.handle(),
                                                       &out)) == PB_STATUS_OUT_OF_RANGE);
      CHECK(out == nullptr);
      const Tensor wrong_batch = x.slice(0, 0, 1).slice(1, 3, 4);
      CHECK(layer.code_of(layer.vtable()->forward_step(
                layer.instance(), state->get(), wrong_batch.handle(), &out)) != PB_STATUS_OK);
      const Tensor wrong_width = ops.zeros({o.batch, 1, o.d_model + 2});
      CHECK(layer.code_of(layer.vtable()->forward_step(
                layer.instance(), state->get(), wrong_width.handle(), &out)) != PB_STATUS_OK);
      CHECK(state->length() == 3);  // refused steps leave the state as it was
      layer.forward_step(*state, x.slice(1, 3, 4));
      CHECK(state->length() == 4);
    }
  }

  if (causal && probe.has_cache()) {
    SUBCASE("state_reorder equals re-running each beam's prompt") {
      detail::check_state_reorder(make, o);
    }
    SUBCASE("state_fork copies equal re-running each source's prompt") {
      detail::check_state_fork(make, o);
    }
  }

  SUBCASE("gradients of x and every parameter match finite differences") {
    for (pb_positional_kind positional : positionals) {
      const std::string positional_text = detail::positional_name(positional);
      CAPTURE(positional_text);
      AttentionUnderTest layer = make();
      layer.init(detail::layer_context(o, o.grad_d_model, o.grad_n_heads, o.grad_seq_len, causal,
                                       positional, o.seed));
      Generator g(layer.ops(), o.seed + 7);
      Tensor input = ops.uniform({1, o.grad_seq_len, o.grad_d_model}, g, -1.0, 1.0);
      input.requires_grad(true);
      std::vector<Tensor> inputs = {input};
      std::vector<std::string> names = {"x"};
      for (auto& [name, tensor] : layer.parameters()) {
        inputs.push_back(tensor);  // perturbed in place: the layer reads the same storage
        names.push_back(name);
      }
      GradcheckResult r = gradcheck(
          layer.ops(), [&](const std::vector<Tensor>& in) { return layer.forward(in[0]); }, inputs,
          o.gradcheck);
      CHECK_MESSAGE(r.ok, r.message << " (input 0 is x, then the parameters in order)");
    }
  }

  SUBCASE("init refuses contexts the layer cannot serve") {
    auto init_code = [&](const pb_layer_context& ctx) {
      AttentionUnderTest layer = make();
      return layer.code_of(layer.vtable()->init(layer.instance(), &ctx));
    };
    if (!causal) {
      // The "non-causal attention in a causal language model" refusal.
      CHECK(init_code(detail::layer_context(o, o.d_model, o.n_heads, o.seq_len, true,
                                            PB_POSITIONAL_NONE, o.seed)) ==
            PB_STATUS_INVALID_ARGUMENT);
    }
    if (!probe.has(PB_ATTENTION_CAP_ROTARY)) {
      CHECK(init_code(detail::layer_context(o, o.d_model, o.n_heads, o.seq_len, causal,
                                            PB_POSITIONAL_ROTARY, o.seed)) ==
            PB_STATUS_INVALID_ARGUMENT);
    }
    CHECK(init_code(detail::layer_context(o, o.d_model + 1, o.n_heads, o.seq_len, causal,
                                          PB_POSITIONAL_NONE, o.seed)) ==
          PB_STATUS_INVALID_ARGUMENT);
    CHECK(init_code(detail::layer_context(o, o.d_model, 0, o.seq_len, causal, PB_POSITIONAL_NONE,
                                          o.seed)) == PB_STATUS_INVALID_ARGUMENT);
  }

  SUBCASE("cross-attention (interface 1.3)") { check_cross_attention_conformance(make, o); }
}

}  // namespace patchbay::testing

#include "patchbay/testing/attention_cross_conformance.hpp"  // needs the declarations above
