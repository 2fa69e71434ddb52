// LoRA (Hu et al. 2021) as a host-side mechanism on the model's named weight matrices
// ([train.lora]; docs/finetuning.md). No plugin changes: each adapter is attached to its
// weight's storage through the engine (engine/low_rank_adapter.hpp), and every engine product
// a plugin computes with those rows as y = x · Wᵀ (matmul(x, W.slice(0, lo, hi), false, true),
// linear(x, W)) becomes
//
//   y = x · W0ᵀ + s · (drop(x) · Aᵀ) · Bᵀ    s = alpha / rank (PEFT's scaling, without rsLoRA)
//
//   W0: the weight, untouched and frozen (no dW is computed); A [rank, k] ~ U(-1/sqrt(k),
//   1/sqrt(k)) (PEFT's kaiming_uniform(a = sqrt 5)), B [n, rank] = 0 at the start, so the
//   adapted model starts exactly at the base model; drop: PEFT's lora_dropout on the adapter's
//   input, in training only, its masks drawn from the run's seed and the micro-batch's index
//   (begin_micro_batch), so a resumed run draws the same masks.
// Autograd gives dA, dB (and dx) directly; only A and B are given to the optimizer and stored
// in checkpoints; every model parameter is frozen. A plugin that computes with a targeted
// weight in a form the engine cannot adapt is refused by the engine at its first product
// (naming the weight and its plugin), or, where no product reached an adapter at all, by
// check_applied() after the first step. merge_into_weights() writes W0 + s·B·A into the
// weights (`patchbay export --merge-lora`); merged and adapted logits agree to f32 rounding.
//
// Targets ([train.lora] targets): names of the weight matrices, either
//   - aliases: "attention.q", "attention.k", "attention.v" (the rows of q, k, v in a fused
//     blocks.<i>.attn.qkv.weight laid out [q; k; v] with d_model rows of q and equal rows of k
//     and v — the dense attention's and the imports' layout), "attention.o" (attn.proj.weight),
//     "mlp.up" (ffn.fc.weight), "mlp.gate" (ffn.gate.weight), "mlp.down" (ffn.proj.weight),
//     "attention.*" and "mlp.*" (all of theirs that exist); Hugging Face's q_proj, k_proj,
//     v_proj, o_proj, up_proj, gate_proj, down_proj mean the same;
//   - or patterns over parameter names (fine_tuning.hpp: "blocks.0-3.attn.proj.weight"),
//     which select whole 2-D matrices.
// A target matching nothing is refused, listing the matrices there are.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "config/config_document.hpp"
#include "config/schema_registry.hpp"
#include "engine/low_rank_adapter.hpp"
#include "engine/tensor.hpp"
#include "model/language_model.hpp"
#include "train/train_config.hpp"

namespace patchbay::train {

// Declares [train.lora] (rank, alpha, dropout, targets) in `schema`.
void declare_lora_section(config::SchemaRegistry& schema);
// [train.lora] of a validated config; enabled = the table exists. Throws
// Error(kInvalidArgument) for empty targets.
LoraOptions lora_options_from_config(const config::ResolvedConfig& config);

// One adapted block of rows of a model weight.
struct LoraAdapter {
  std::string parameter;  // the model's weight, e.g. "blocks.0.attn.qkv.weight"
  std::string part;       // "q", "k", "v", or "all" (the whole matrix)
  std::string owner;      // the plugin computing with it, e.g. "attention plugin 'dense'"
  int64_t row_begin = 0;
  int64_t rows = 0;
  engine::Tensor weight;  // the model's parameter [n_total, k] (the plugin's storage), frozen
  engine::Tensor a;       // [rank, k] leaf, trained
  engine::Tensor b;       // [rows, rank] leaf, trained
  engine::AttachedLowRankAdapter attached;  // the engine applies it while attached
  std::string name() const { return "lora/" + parameter + "/" + part; }  // + "/A", "/B"
};

// Names the plugin that computes with a parameter ("attention plugin 'dense'"), for messages.
using ParameterOwner = std::function<std::string(const std::string& parameter)>;

// The owner of a model parameter for messages: "attention plugin 'dense'" for
// blocks.<i>.attn.*, "feed-forward plugin 'mlp'" for blocks.<i>.ffn.*, else "the host model".
std::string parameter_owner(const model::ModelOptions& options, const std::string& parameter);

class LoraAdapters {
 public:
  // Creates adapters on the targets (see above), attaches them to the weights and freezes
  // every parameter of `parameters` (the model's). `d_model` splits a fused qkv. `seed` draws
  // A and seeds the dropout masks. Throws Error(kInvalidArgument) as described above.
  LoraAdapters(const std::vector<model::NamedParameter>& parameters, int64_t d_model,
               const LoraOptions& options, uint64_t seed, const ParameterOwner& owner = {});

  // The trained tensors, "lora/<parameter>/<part>/A" and ".../B", in adapter order.
  std::vector<model::NamedParameter> parameters() const;
  // Before each training micro-batch's forward: the dropout masks of micro-batch `index` (a
  // global count, step · accum + micro) from the run's seed.
  void begin_micro_batch(uint64_t index);
  // After a training step's forward: throws Error(kInvalidArgument) naming the weights whose
  // adapters no engine product applied (their plugin computed with them by other means, so
  // the adapter would silently do nothing). Checks once; later calls return at once.
  void check_applied();
  // Detaches every adapter and writes W[rows] = W0 + s·B·A into the weights (merge; no
  // autograd). The model then computes with the merged weights alone.
  void merge_into_weights();
  // JSON object for checkpoint metadata: rank, alpha, dropout, scale, targets, adapters.
  std::string describe_json() const;

  double scale() const { return scale_; }
  const std::vector<LoraAdapter>& adapters() const { return adapters_; }

 private:
  LoraOptions options_;
  double scale_ = 1.0;
  uint64_t seed_ = 0;
  bool applied_checked_ = false;
  std::vector<LoraAdapter> adapters_;
};

}  // namespace patchbay::train
