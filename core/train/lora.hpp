// LoRA (Hu et al. 2021) as a host-side mechanism on the model's named weight matrices
// ([train.lora]; docs/finetuning.md). No plugin changes: the plugin keeps computing with its own
// weight tensor W, and the host keeps that tensor equal to the adapted weight.
//
//   W[rows] = W0 + s · B · A        s = alpha / rank (PEFT's scaling, without rsLoRA)
//   W0 [n, k]: the base rows (a frozen copy), A [rank, k] ~ U(-1/sqrt(k), 1/sqrt(k)) (PEFT's
//   kaiming_uniform(a = sqrt 5)), B [n, rank] = 0 at the start, so the adapted model starts
//   exactly at the base model.
//
// Forward: materialize() writes W0 + s·B·A into the targeted rows of W (after every optimizer
// update and after loading). W keeps requires_grad, so the backward leaves dL/dW in W.grad
// without any change to the plugin; fold_gradients() turns it into the adapters' gradients,
//   dL/dB = s · G · A^T,   dL/dA = s · B^T · G,   G = dL/dW[rows]   (exact chain rule),
// and drops W.grad. Only A and B are given to the optimizer and stored in checkpoints; every
// other model parameter is frozen. Because W itself holds the merged weights, "merge" is just
// writing W out (`patchbay export --merge-lora`), and merged and adapted logits agree exactly.
// Cost beside PEFT: the weight gradient G of each targeted matrix is computed (one GEMM per
// target and micro-batch) and W0 is a copy of the targeted rows.
//
// Dropout on the adapter's input (PEFT's lora_dropout) cannot be expressed as a weight and is
// refused when > 0.
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
#include <memory>
#include <string>
#include <vector>

#include "config/config_document.hpp"
#include "config/schema_registry.hpp"
#include "engine/tensor.hpp"
#include "model/language_model.hpp"
#include "train/train_config.hpp"

namespace patchbay::train {

// Declares [train.lora] (rank, alpha, dropout, targets) in `schema`.
void declare_lora_section(config::SchemaRegistry& schema);
// [train.lora] of a validated config; enabled = the table exists. Throws
// Error(kInvalidArgument) for dropout > 0 (see above) or empty targets.
LoraOptions lora_options_from_config(const config::ResolvedConfig& config);

// One adapted block of rows of a model weight.
struct LoraAdapter {
  std::string parameter;  // the model's weight, e.g. "blocks.0.attn.qkv.weight"
  std::string part;       // "q", "k", "v", or "all" (the whole matrix)
  int64_t row_begin = 0;
  int64_t rows = 0;
  engine::Tensor weight;  // the model's parameter [n_total, k] (the plugin's storage)
  engine::Tensor base;    // W0 = weight rows at attach time [rows, k], no grad
  engine::Tensor a;       // [rank, k] leaf, trained
  engine::Tensor b;       // [rows, rank] leaf, trained
  std::string name() const { return "lora/" + parameter + "/" + part; }  // + "/A", "/B"
};

class LoraAdapters {
 public:
  // Creates adapters on the targets (see above) and freezes every other parameter of
  // `parameters` (the model's). The targeted weights keep requires_grad (their gradient feeds
  // fold_gradients) but must not be handed to an optimizer. `d_model` splits a fused qkv.
  // `seed` draws A. Throws Error(kInvalidArgument) as described above.
  LoraAdapters(const std::vector<model::NamedParameter>& parameters, int64_t d_model,
               const LoraOptions& options, uint64_t seed);

  // The trained tensors, "lora/<parameter>/<part>/A" and ".../B", in adapter order.
  std::vector<model::NamedParameter> parameters() const;
  // W[rows] = W0 + s·B·A for every adapter (no autograd).
  void materialize();
  // Adds the adapters' gradients from the targeted weights' (accumulated) gradients and drops
  // those. Does nothing for a weight no backward reached.
  void fold_gradients();
  // The targeted weights, each once, in parameter order: the tensors whose gradients backward
  // produces (what a data-parallel reducer averages before fold_gradients).
  std::vector<engine::Tensor> target_weights() const;
  // JSON object for checkpoint metadata: rank, alpha, scale, targets, adapters.
  std::string describe_json() const;

  double scale() const { return scale_; }
  const std::vector<LoraAdapter>& adapters() const { return adapters_; }

 private:
  LoraOptions options_;
  double scale_ = 1.0;
  std::vector<LoraAdapter> adapters_;
};

}  // namespace patchbay::train
