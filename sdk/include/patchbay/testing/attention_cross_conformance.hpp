// Patchbay SDK conformance kit, cross-attention part (attention interface 1.3,
// PB_ATTENTION_CAP_CROSS). Included by attention_conformance.hpp, whose
// check_attention_conformance() runs these checks for every layer; a layer that declares the
// capability must pass:
//   - cross_memory_create + forward_cross map x [B, Tq, C] and memory [B, Tk, C] (Tq != Tk)
//     to [B, Tq, C], finite and deterministic; no mask equals an all-ones mask;
//   - padded keys are never attended: changing the padded rows of the memory (by a lot)
//     changes no output, bit for bit; changing an attended row does (the check can fail);
//     sequences do not see each other's memory;
//   - against a naive reference built from the layer itself: each query of each sequence,
//     alone, over that sequence's attended keys only (no mask), equals the batched, masked
//     result within `cross_tolerance` (padding = removal, queries independent, no causal
//     mask), and so does the same with the attended keys in reverse order (no positions);
//     a layer declaring PB_ATTENTION_CAP_CROSS_POSITIONAL (interface 1.6: keys weighed by
//     position, e.g. Linformer) is checked instead with each query alone against its own
//     sequence's whole memory and mask (queries and sequences independent; padding stays
//     in place, so removal and key order are not promised);
//   - one memory serves several calls (decoding): the queries in two chunks give the
//     outputs of all at once;
//   - a sequence whose keys are all padding gives finite outputs that do not depend on its
//     memory;
//   - gradients of x, the memory and every parameter (with padding) match finite
//     differences; padded memory rows get a zero gradient;
//   - refusals: a memory of another width or rank, a mask of another shape or with an entry
//     other than 0 / 1, an x of another batch or width;
//   - when AttentionConformanceOptions::cross_reference is set, the layer's output equals
//     that plugin-specific reference (e.g. softmax(q k^T) v written from the parameters).
// A layer without the capability must leave the three functions NULL (the host refuses it as
// cross-attention by the capability, naming it). Every layer of these checks is initialised
// with max_seq_len >= the memory length, as the host does for cross-attention.
#pragma once

#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "patchbay/attention.h"
#include "patchbay/tensor.hpp"
#include "patchbay/testing/attention_conformance.hpp"
#include "patchbay/testing/gradcheck.hpp"

namespace patchbay::testing {
namespace attention_kit_detail {

// Inputs of the cross-attention checks: sequence 0 attends to every key; sequence 1 has
// padding at the start, in the middle and at the end (keys 0, Tk / 2 and Tk - 1).
struct CrossCase {
  Tensor x;       // [B, Tq, C]
  Tensor memory;  // [B, Tk, C]
  Tensor mask;    // [B, Tk] int64, 1 attended / 0 padding
  std::vector<uint8_t> valid;
  int64_t batch = 2, query_len = 0, memory_len = 0, d_model = 0;
  bool attended(int64_t b, int64_t j) const {
    return valid[static_cast<size_t>(b * memory_len + j)] != 0;
  }
  std::vector<int64_t> attended_keys(int64_t b) const {
    std::vector<int64_t> keys;
    for (int64_t j = 0; j < memory_len; ++j)
      if (attended(b, j)) keys.push_back(j);
    return keys;
  }
};

inline CrossCase cross_case(const pb_ops_table* table, int64_t query_len, int64_t memory_len,
                            int64_t d_model, uint64_t seed) {
  REQUIRE(memory_len >= 4);
  Ops ops(table);
  CrossCase c;
  c.query_len = query_len;
  c.memory_len = memory_len;
  c.d_model = d_model;
  Generator g(table, seed);
  c.x = ops.uniform({c.batch, query_len, d_model}, g, -1.0, 1.0);
  c.memory = ops.uniform({c.batch, memory_len, d_model}, g, -1.0, 1.0);
  c.valid.assign(static_cast<size_t>(c.batch * memory_len), 1);
  for (int64_t j : {int64_t{0}, memory_len / 2, memory_len - 1})
    c.valid[static_cast<size_t>(memory_len + j)] = 0;
  std::vector<int64_t> mask(c.valid.begin(), c.valid.end());
  c.mask = ops.from_vector(mask, {c.batch, memory_len});
  return c;
}

// Rows `keys` of memory[b] joined in that order: [1, keys.size(), C].
inline Tensor memory_rows(const Tensor& memory, int64_t b, const std::vector<int64_t>& keys) {
  std::vector<Tensor> rows;
  for (int64_t j : keys) rows.push_back(memory.slice(0, b, b + 1).slice(1, j, j + 1));
  return Ops(memory.ops()).concat(rows, 1);
}

// A layer ready for the cross checks: ready_layer's context with max_seq_len covering the
// memory (a layer projecting over key positions, Linformer, sizes its projections by it).
inline AttentionUnderTest ready_cross_layer(const AttentionFactory& make,
                                            const AttentionConformanceOptions& o) {
  AttentionConformanceOptions covering = o;
  covering.seq_len = std::max(o.seq_len, o.cross_memory_len);
  return ready_layer(make, covering, PB_POSITIONAL_NONE, o.seed);
}

inline void check_cross_absent(const AttentionUnderTest& layer) {
  const pb_attention_vtable* vt = layer.vtable();
  if (!PB_HAS_FIELD(vt, pb_attention_vtable, forward_cross)) return;  // an older interface
  CHECK_MESSAGE((vt->cross_memory_create == nullptr && vt->cross_memory_destroy == nullptr &&
                 vt->forward_cross == nullptr),
                "the layer does not declare PB_ATTENTION_CAP_CROSS but sets cross-attention "
                "functions; declare the capability or leave them NULL");
}

// Each query alone over its sequence's attended keys only, no mask, and the same with those
// keys in reverse order, equals the batched, masked result y (padding = removal, no positions).
inline void check_cross_per_query_removal(const AttentionUnderTest& layer,
                                          const AttentionConformanceOptions& o, const CrossCase& c,
                                          const Tensor& y) {
  for (int64_t b = 0; b < c.batch; ++b) {
    std::vector<int64_t> keys = c.attended_keys(b);
    const Tensor kept = memory_rows(c.memory, b, keys);
    std::vector<int64_t> reversed(keys.rbegin(), keys.rend());
    const Tensor kept_reversed = memory_rows(c.memory, b, reversed);
    for (int64_t i = 0; i < c.query_len; ++i) {
      CAPTURE(b);
      CAPTURE(i);
      const Tensor query = c.x.slice(0, b, b + 1).slice(1, i, i + 1);
      const std::vector<float> expected =
          y.slice(0, b, b + 1).slice(1, i, i + 1).contiguous().to_vector();
      CHECK(max_abs_diff(layer.cross(query, kept, nullptr).to_vector(), expected) <=
            o.cross_tolerance);
      CHECK(max_abs_diff(layer.cross(query, kept_reversed, nullptr).to_vector(), expected) <=
            o.cross_tolerance);
    }
  }
}

inline void check_cross_outputs(const AttentionFactory& make, const AttentionConformanceOptions& o,
                                const CrossCase& c) {
  AttentionUnderTest layer = ready_cross_layer(make, o);
  NoGradGuard no_grad(layer.ops());
  Ops ops(layer.ops());
  const Tensor y = layer.cross(c.x, c.memory, &c.mask);
  REQUIRE(y.shape() == c.x.shape());
  const std::vector<float> out = y.to_vector();
  CHECK(all_finite(out));
  CHECK(max_abs_diff(layer.cross(c.x, c.memory, &c.mask).to_vector(), out) == 0.0);

  SUBCASE("no mask equals an all-ones mask") {
    const Tensor ones = ops.ones({c.batch, c.memory_len}, PB_DTYPE_I64);
    CHECK(max_abs_diff(layer.cross(c.x, c.memory, nullptr).to_vector(),
                       layer.cross(c.x, c.memory, &ones).to_vector()) <= o.cross_tolerance);
  }

  SUBCASE("padded keys are never attended (bit for bit); attended keys and sequences matter") {
    std::vector<float> padded_noise(static_cast<size_t>(c.batch * c.memory_len * c.d_model), 0.f);
    std::vector<float> attended_noise(padded_noise.size(), 0.f);
    for (int64_t b = 0; b < c.batch; ++b)
      for (int64_t j = 0; j < c.memory_len; ++j)
        for (int64_t d = 0; d < c.d_model; ++d) {
          const size_t at = static_cast<size_t>((b * c.memory_len + j) * c.d_model + d);
          const float value = 3.0f + 0.37f * static_cast<float>((at * 7919) % 13);
          (c.attended(b, j) ? attended_noise : padded_noise)[at] = value;
        }
    const std::vector<int64_t> shape = c.memory.shape();
    const Tensor padded_changed = c.memory + ops.from_vector(padded_noise, shape);
    CHECK_MESSAGE(max_abs_diff(layer.cross(c.x, padded_changed, &c.mask).to_vector(), out) == 0.0,
                  "changing padded memory rows changed an output: padded keys were attended");
    // Only sequence 1's attended rows change: its outputs must move, sequence 0's must not.
    std::vector<float> seq1_noise = attended_noise;
    std::fill(seq1_noise.begin(), seq1_noise.begin() + c.memory_len * c.d_model, 0.f);
    const std::vector<float> moved =
        layer.cross(c.x, c.memory + ops.from_vector(seq1_noise, shape), &c.mask).to_vector();
    const auto half = static_cast<std::ptrdiff_t>(c.query_len * c.d_model);
    CHECK_MESSAGE(max_abs_diff(std::vector<float>(moved.begin(), moved.begin() + half),
                               std::vector<float>(out.begin(), out.begin() + half)) == 0.0,
                  "sequence 0's outputs depend on sequence 1's memory");
    CHECK_MESSAGE(max_abs_diff(std::vector<float>(moved.begin() + half, moved.end()),
                               std::vector<float>(out.begin() + half, out.end())) > 1e-4,
                  "changing attended memory rows did not change the outputs");
  }

  if (layer.has(PB_ATTENTION_CAP_CROSS_POSITIONAL)) {
    SUBCASE("equals each query alone over its own sequence's memory and mask (keys positional)") {
      for (int64_t b = 0; b < c.batch; ++b) {
        const Tensor own_memory = c.memory.slice(0, b, b + 1);
        const Tensor own_mask = c.mask.slice(0, b, b + 1);
        for (int64_t i = 0; i < c.query_len; ++i) {
          CAPTURE(b);
          CAPTURE(i);
          const Tensor query = c.x.slice(0, b, b + 1).slice(1, i, i + 1);
          const std::vector<float> expected =
              y.slice(0, b, b + 1).slice(1, i, i + 1).contiguous().to_vector();
          CHECK(max_abs_diff(layer.cross(query, own_memory, &own_mask).to_vector(), expected) <=
                o.cross_tolerance);
        }
      }
    }
  } else {
    SUBCASE("equals each query alone over its sequence's attended keys (any order), no mask") {
      check_cross_per_query_removal(layer, o, c, y);
    }
  }

  SUBCASE("one memory serves several calls (decoding steps)") {
    void* memory = layer.cross_memory_create(c.memory, &c.mask);
    const int64_t first = c.query_len / 2;
    const Tensor a = layer.forward_cross(c.x.slice(1, 0, first), memory);
    const Tensor b = layer.forward_cross(c.x.slice(1, first, c.query_len), memory);
    layer.vtable()->cross_memory_destroy(layer.instance(), memory);
    CHECK(max_abs_diff(ops.concat({a, b}, 1).to_vector(), out) <= o.cross_tolerance);
  }

  if (o.cross_reference) {
    SUBCASE("equals the plugin's naive reference") {
      CHECK(max_abs_diff(o.cross_reference(layer.parameters(), c.x, c.memory, c.valid).to_vector(),
                         out) <= o.cross_tolerance);
    }
  }
}

inline void check_cross_all_padded(const AttentionFactory& make,
                                   const AttentionConformanceOptions& o, const CrossCase& c) {
  AttentionUnderTest layer = ready_cross_layer(make, o);
  NoGradGuard no_grad(layer.ops());
  Ops ops(layer.ops());
  std::vector<int64_t> mask(static_cast<size_t>(c.batch * c.memory_len), 1);
  std::fill(mask.begin(), mask.begin() + c.memory_len, 0);  // sequence 0: nothing attended
  const Tensor m = ops.from_vector(mask, {c.batch, c.memory_len});
  const std::vector<float> y = layer.cross(c.x, c.memory, &m).to_vector();
  CHECK(all_finite(y));
  Generator g(layer.ops(), o.seed + 77);
  const Tensor other = ops.concat(
      {ops.uniform({1, c.memory_len, c.d_model}, g, -5.0, 5.0), c.memory.slice(0, 1, 2)}, 0);
  CHECK(max_abs_diff(layer.cross(c.x, other, &m).to_vector(), y) == 0.0);
}

inline void check_cross_refusals(const AttentionFactory& make, const AttentionConformanceOptions& o,
                                 const CrossCase& c) {
  AttentionUnderTest layer = ready_cross_layer(make, o);
  NoGradGuard no_grad(layer.ops());
  Ops ops(layer.ops());
  const pb_attention_vtable* vt = layer.vtable();
  auto create_code = [&](const Tensor& memory, const Tensor* mask) {
    void* made = nullptr;
    const pb_status_code code = layer.code_of(vt->cross_memory_create(
        layer.instance(), memory.handle(), mask != nullptr ? mask->handle() : nullptr, 0, &made));
    if (made != nullptr) vt->cross_memory_destroy(layer.instance(), made);
    return code;
  };
  CHECK(create_code(ops.zeros({c.batch, c.memory_len, c.d_model + 1}), nullptr) != PB_STATUS_OK);
  CHECK(create_code(ops.zeros({c.memory_len, c.d_model}), nullptr) != PB_STATUS_OK);
  const Tensor short_mask = c.mask.slice(1, 0, c.memory_len - 1);
  CHECK(create_code(c.memory, &short_mask) != PB_STATUS_OK);
  std::vector<int64_t> twos(static_cast<size_t>(c.batch * c.memory_len), 1);
  twos[3] = 2;
  const Tensor bad_values = ops.from_vector(twos, {c.batch, c.memory_len});
  CHECK(create_code(c.memory, &bad_values) != PB_STATUS_OK);
  void* memory = layer.cross_memory_create(c.memory, &c.mask);
  pb_tensor* out = nullptr;
  const Tensor one_sequence = c.x.slice(0, 0, 1);
  CHECK(layer.code_of(vt->forward_cross(layer.instance(), one_sequence.handle(), memory, 0,
                                        &out)) != PB_STATUS_OK);
  const Tensor wrong_width = ops.zeros({c.batch, 2, c.d_model + 2});
  CHECK(layer.code_of(vt->forward_cross(layer.instance(), wrong_width.handle(), memory, 0, &out)) !=
        PB_STATUS_OK);
  CHECK(out == nullptr);
  vt->cross_memory_destroy(layer.instance(), memory);
}

inline void check_cross_gradients(const AttentionFactory& make,
                                  const AttentionConformanceOptions& o) {
  constexpr int64_t kQueryLen = 3, kMemoryLen = 5;
  AttentionUnderTest layer = make();
  layer.init(layer_context(o, o.grad_d_model, o.grad_n_heads, std::max(o.grad_seq_len, kMemoryLen),
                           layer.has(PB_ATTENTION_CAP_CAUSAL), PB_POSITIONAL_NONE, o.seed));
  const CrossCase c = cross_case(layer.ops(), kQueryLen, kMemoryLen, o.grad_d_model, o.seed + 11);
  Tensor x = c.x, memory = c.memory;
  x.requires_grad(true);
  memory.requires_grad(true);
  std::vector<Tensor> inputs = {x, memory};
  for (auto& [name, tensor] : layer.parameters()) {
    const bool trainable =
        std::find(o.non_trainable_parameters.begin(), o.non_trainable_parameters.end(), name) ==
        o.non_trainable_parameters.end();
    if (trainable) inputs.push_back(tensor);
  }
  GradcheckOptions options = o.gradcheck;
  options.missing_gradient_is_zero = true;  // padded rows: no path, numeric gradient 0 too
  GradcheckResult r = gradcheck(
      layer.ops(),
      [&](const std::vector<Tensor>& in) { return layer.cross(in[0], in[1], &c.mask); }, inputs,
      options);
  CHECK_MESSAGE(r.ok, r.message << " (input 0 is x, 1 the memory, then the trainable parameters)");
  // Padded rows of the memory: exactly zero gradient.
  Tensor loss = layer.cross(x, memory, &c.mask).sum();
  loss.backward();
  const Tensor grad = memory.grad();
  if (grad.defined()) {
    const std::vector<float> g = grad.to_vector();
    for (int64_t j = 0; j < c.memory_len; ++j) {
      if (c.attended(1, j)) continue;
      for (int64_t d = 0; d < c.d_model; ++d)
        CHECK(g[static_cast<size_t>((c.memory_len + j) * c.d_model + d)] == 0.0f);
    }
  }
}

}  // namespace attention_kit_detail

inline void check_cross_attention_conformance(const AttentionFactory& make,
                                              const AttentionConformanceOptions& o) {
  namespace detail = attention_kit_detail;
  AttentionUnderTest probe = make();
  if (!probe.has(PB_ATTENTION_CAP_CROSS)) {
    detail::check_cross_absent(probe);
    return;
  }
  const pb_attention_vtable* vt = probe.vtable();
  REQUIRE_MESSAGE(PB_HAS_FIELD(vt, pb_attention_vtable, forward_cross),
                  "declares PB_ATTENTION_CAP_CROSS but the vtable predates interface 1.3");
  REQUIRE_MESSAGE((vt->cross_memory_create != nullptr && vt->cross_memory_destroy != nullptr &&
                   vt->forward_cross != nullptr),
                  "declares PB_ATTENTION_CAP_CROSS but a cross-attention function is NULL");
  const detail::CrossCase c =
      detail::cross_case(probe.ops(), o.cross_query_len, o.cross_memory_len, o.d_model, o.seed + 5);
  if (o.cross_refused_by_configuration) {
    AttentionUnderTest layer = detail::ready_cross_layer(make, o);
    void* made = nullptr;
    CHECK(layer.code_of(vt->cross_memory_create(layer.instance(), c.memory.handle(), nullptr, 0,
                                                &made)) == PB_STATUS_INVALID_ARGUMENT);
    CHECK(made == nullptr);
    return;
  }
  SUBCASE("cross-attention outputs, padding, reference, memory reuse") {
    detail::check_cross_outputs(make, o, c);
  }
  SUBCASE("cross-attention: a sequence with every key padded") {
    detail::check_cross_all_padded(make, o, c);
  }
  SUBCASE("cross-attention refuses wrong shapes and mask values") {
    detail::check_cross_refusals(make, o, c);
  }
  SUBCASE("cross-attention gradients match finite differences") {
    detail::check_cross_gradients(make, o);
  }
}

}  // namespace patchbay::testing
