// Which Hugging Face `transformers` architecture a Patchbay model is, and back.
//
//   GPT2LMHeadModel  <- pre-norm LayerNorm, learned positions, dense attention (full, causal),
//                       mlp with gelu (tanh: "gelu_new"), gelu_erf ("gelu") or relu; tied head
//                       (or untied: tie_word_embeddings = false, lm_head.weight written);
//                       mlp without biases exports zero biases (GPT-2 always has them).
//   LlamaForCausalLM <- pre-norm RMSNorm, rotary (rotate-half, theta = rope_theta: the same
//                       convention as HF's LLaMA, so q/k rows need no permutation; LLaMA 3.1's
//                       rope_scaling {rope_type "llama3"} <-> the dense attention's
//                       rope_scaling = "llama3" keys), dense attention with
//                       num_key_value_heads <-> n_kv_heads (grouped-query), mlp swiglu (gate ->
//                       gate_proj, fc -> up_proj, proj -> down_proj; silu), untied head (tied:
//                       tie_word_embeddings); attention_bias = true unless every q/k/v/o bias is
//                       zero; mlp_bias from the mlp's `bias`.
// Everything else is refused with a message naming the component or option that has no
// counterpart (LSH/sparse/linear/Performer attention, MoE, ALiBi, sinusoidal or no
// positions, sliding windows, post-norm, reversible residuals, an embedding scale ≠ 1, a
// third-party plugin using a built-in name). Dropout rates are carried over (they do not
// change inference).
//   T5ForConditionalGeneration <- model.architecture = "encoder_decoder" (t5_architecture.hpp).
#pragma once

#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "model/language_model.hpp"

namespace patchbay::interop {

enum class HfFamily { kGpt2, kLlama, kT5 };

// "gpt2", "llama", "t5" (config.json model_type)
const char* hf_family_name(HfFamily family);
// "GPT2LMHeadModel", "LlamaForCausalLM", "T5ForConditionalGeneration"
const char* hf_architecture(HfFamily family);

// LLaMA 3.1 rope scaling (config.json rope_scaling / rope_parameters with rope_type "llama3").
struct HfRopeScaling {
  bool llama3 = false;  // false: plain rotary
  double factor = 8.0;
  double low_freq_factor = 1.0;
  double high_freq_factor = 4.0;
  int64_t original_context = 8192;  // original_max_position_embeddings
};

// What a T5ForConditionalGeneration has beyond the single-stack fields (family kT5).
struct HfT5Fields {
  int64_t encoder_layers = 0, decoder_layers = 0;
  int64_t source_context_length = 512;  // not in T5's config.json: its "patchbay" entry
  bool relative_bias = true;            // false: positional = "none" (zero bias tables in HF)
  int32_t relative_buckets = 32, relative_max_distance = 128;
  std::string feed_forward_proj;     // "relu", "gelu_new", "gelu", "gated-silu"
  bool attention_bias = false;       // the cross-attention's [model.attention] bias (zero in HF)
  int64_t pad_id = -1, eos_id = -1;  // the tokenizer's "<pad>" (decoder start) and "</s>"
  // Import only: transformers 5's tied head without rescaling (tie_word_embeddings = true,
  // scale_decoder_outputs = false: lm_head is shared.weight): Patchbay's untied head.weight,
  // filled from shared.weight.
  bool head_from_shared = false;
};

struct HfModelShape {
  HfFamily family = HfFamily::kGpt2;
  model::ModelOptions
      options;  // vocab_size, context_length, layers, heads, widths, norm eps, rope, tie, dropout
  std::string activation;        // the mlp's: "gelu" (tanh), "gelu_erf", "relu", "swiglu"
  bool mlp_bias = true;          // [model.feedforward] bias
  bool attention_bias = true;    // LLaMA: q/k/v/o biases present in HF
  double attention_dropout = 0;  // [model.attention] dropout
  double mlp_dropout = 0;        // [model.feedforward] dropout
  int64_t n_kv_heads = 0;        // key/value heads; 0 or options.n_heads: multi-head
  HfRopeScaling rope_scaling;    // LLaMA only
  // T5 only (t5_architecture.hpp): the encoder-decoder's own options; `options` is its base
  // (vocab, decoder context, heads, widths, norm eps, tie, dropout).
  HfT5Fields t5;
};

// Key/value heads of the shape (n_kv_heads, or n_heads when 0).
int64_t kv_heads_of(const HfModelShape& shape);

// One component a run used (from its checkpoint's "components" metadata).
struct UsedComponent {
  std::string kind;    // "attention", "feedforward", ...
  std::string name;    // "dense"
  std::string plugin;  // "attention-dense"
};

// The HF shape of a model, or Error(kInvalidArgument) naming what has no counterpart.
// `components` may be empty (then the built-in plugins are assumed for "dense" and "mlp").
HfModelShape hf_shape_of_model(const model::ModelOptions& options,
                               const model::ComponentTables& tables,
                               const std::vector<UsedComponent>& components);

// config.json and generation_config.json for the shape. `eos_id`: the end-of-text special's id.
nlohmann::json hf_config_json(const HfModelShape& shape, std::optional<int64_t> eos_id);
nlohmann::json hf_generation_config_json(const HfModelShape& shape, std::optional<int64_t> eos_id);

// Import: the shape a config.json describes; Error(kInvalidArgument) naming the field whose
// value has no Patchbay counterpart (rope scaling other than llama3, scaled-by-layer attention,
// a head_dim other than hidden / heads, ...).
HfModelShape hf_shape_from_config_json(const nlohmann::json& config);

// The [model], [model.attention] and [model.feedforward] tables of a Patchbay config for it.
std::string patchbay_model_toml(const HfModelShape& shape);

}  // namespace patchbay::interop
