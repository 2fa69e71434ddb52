// Low-rank adapters on a parameter's storage: LoRA (Hu et al. 2021) computed by the engine's
// products, for any plugin, without touching the weight (docs/finetuning.md).
//
// The host attaches an adapter to rows [row_begin, row_begin + rows) of a weight W [N, K]
// (a contiguous f32 parameter). From then on every engine product that reads rows of W's
// storage as y = x · W[v0, v0 + n)ᵀ — matmul(x, W.slice(0, v0, v0 + n), false, true), its
// transposed spelling matmul(x, W[..]ᵀ-view, false, false), or linear(x, W[..], bias) — gives
//
//   y = x · W[v0, v0+n)ᵀ + s · (drop(x) · Aᵀ) · B[rows ∩ view]ᵀ      (on the intersecting columns)
//
// with A [r, K], B [rows, r] and s the scale (PEFT's lora_dropout and scaling: dropout acts on
// the adapter's input only, which no weight could express). The base product is W's own; when
// W does not require grad (the frozen base model) its backward computes no dW, only dx; the
// adapter's part is built from differentiable ops, so autograd gives dA, dB and its share of
// dx. Several adapters on disjoint rows of one weight (q and v rows of a fused qkv) share one
// product: [M, Σr] · [n, Σr]ᵀ with each B placed at its rows.
//
// Dropout applies where the product records a gradient (grad mode on, some operand requiring
// grad) — training; evaluation under NoGradGuard sees no dropout. Each adapter draws its masks
// from its own Philox stream, Generator(mix(seed, stream, dropout_key)), reset by
// set_low_rank_adapter_dropout_state (the trainer: per micro-batch, from the run's seed and
// the micro-batch's global index, so a resumed run draws the same masks).
//
// Uses the engine cannot follow are refused, naming the adapter's label, never skipped: W's
// storage as matmul's left operand, in a batched product, a column range of W, rows read with
// a stride other than W's own, an embedding lookup in W. An adapter no product reached at all
// (a plugin that computes with W through some other op) shows as uses() == 0, which the host
// checks after its first step.
//
// Under bf16 autocast the base product reads a per-scope bf16 copy of W (cached like a
// trained parameter's), the adapter's products follow the policy as any matmul. Tensor
// parallel regions are not handled here (the trainer refuses LoRA with tensor parallelism).
#pragma once

#include <cstdint>
#include <string>

#include "engine/tensor.hpp"

namespace patchbay::engine {

struct LowRankAdapter {
  Tensor weight;          // W [N, K]: contiguous f32; its storage is what products are matched by
  int64_t row_begin = 0;  // adapted rows [row_begin, row_begin + rows) of W
  int64_t rows = 0;
  Tensor a;                  // A [r, K], W's device (f32; a trained leaf usually)
  Tensor b;                  // B [rows, r]
  double scale = 1.0;        // s (LoRA: alpha / r)
  double dropout = 0.0;      // p in [0, 1) on the adapter's input
  uint64_t dropout_key = 0;  // this adapter's dropout stream (distinct per adapter)
  std::string label;         // named in every refusal, e.g. "blocks.0.attn.qkv.weight rows ..."
};

// Attached while the handle lives (move-only; destroying or reset() detaches).
class AttachedLowRankAdapter {
 public:
  AttachedLowRankAdapter() = default;
  explicit AttachedLowRankAdapter(int64_t id) : id_(id) {}
  AttachedLowRankAdapter(AttachedLowRankAdapter&& other) noexcept : id_(other.id_) {
    other.id_ = -1;
  }
  AttachedLowRankAdapter& operator=(AttachedLowRankAdapter&& other) noexcept;
  AttachedLowRankAdapter(const AttachedLowRankAdapter&) = delete;
  AttachedLowRankAdapter& operator=(const AttachedLowRankAdapter&) = delete;
  ~AttachedLowRankAdapter() { reset(); }
  void reset();  // detaches now (no-op when detached)
  bool attached() const { return id_ >= 0; }
  // How many products applied this adapter since it was attached.
  int64_t uses() const;

 private:
  int64_t id_ = -1;
};

// Checks the adapter (shapes, dtypes, devices, rows inside W, no overlap with rows another
// adapter on W's storage holds) and attaches it. Throws Error(kInvalidArgument) naming the
// label and what was found.
AttachedLowRankAdapter attach_low_rank_adapter(LowRankAdapter adapter);

// Every adapter's dropout stream restarts at Generator(mix(seed, stream, dropout_key)).
void set_low_rank_adapter_dropout_state(uint64_t seed, uint64_t stream);

// How many adapters are attached (all storages).
int64_t low_rank_adapters_attached();

}  // namespace patchbay::engine
