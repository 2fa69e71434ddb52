// Patchbay's encoder–decoder (model.architecture = "encoder_decoder") <-> transformers'
// T5ForConditionalGeneration: which models map, config.json both ways, and the tensor rules.
//
// The two compute the same function once these are accounted for:
//   - attention scale: Patchbay scores q·kᵀ/√Dh (+ relative bias); HF T5 does not scale
//     (T5 folds 1/√Dh into the initialisation). Export multiplies every q weight (self- and
//     cross-attention) by 1/√Dh, import divides it back (exact when √Dh is a power of two:
//     Dh = 4, 16, 64, 256; otherwise within one rounding per weight).
//   - relative bias: one table [buckets, H] per stack in Patchbay = HF's
//     block.0.layer.0.SelfAttention.relative_attention_bias (layer 0 owns it, the other layers
//     reuse its position_bias), same bucket function (both stacks' directions), same layout.
//     positional = "none" exports zero tables.
//   - RMS norm with gain, no bias, eps = model.norm_eps = layer_norm_epsilon.
//   - feed-forward: mlp without biases (or with biases that are exactly zero), activation
//     relu -> "relu" (T5 v1.0, DenseReluDense wi/wo), gelu (tanh) -> "gelu_new", gelu_erf ->
//     "gelu", swiglu -> "gated-silu", geglu -> "gated-gelu" (T5 v1.1; transformers applies
//     gelu_new, the tanh approximation; DenseReluDense wi_0 = gate, wi_1 = fc, wo = proj).
//   - cross-attention: dense with bias = false (or zero biases), multi-head; q/k/v = the row
//     blocks of cross_attn.qkv.weight, o = cross_attn.proj.weight.
//   - embeddings: one shared table (HF T5 has no separate encoder/decoder tables).
//   - head: tied -> tie_word_embeddings = true (HF scales the decoder output by d_model^-1/2
//     and uses shared.weight, as Patchbay's tied head does); untied -> tie_word_embeddings =
//     false and lm_head.weight (no scaling in either). Import of transformers 5's
//     scale_decoder_outputs = false with a tied head (lm_head = shared.weight, no scaling):
//     an untied head.weight copied from shared.weight.
//   - ids: pad_token_id = decoder_start_token_id = the tokenizer's "<pad>", eos_token_id =
//     "</s>" (the span_corruption / seq2seq objectives add both).
// Refused, naming the item: separate embeddings, layer norm, cross-attention other than dense,
// grouped-query cross-attention, feed-forward other than mlp (MoE), an mlp with non-zero
// biases, positional kinds other than t5_relative / none (refused by the model config already).
//
// clang-format off
//   Patchbay                                  T5ForConditionalGeneration
//   shared.weight [V,C]                       shared.weight
//   encoder.relative_bias.weight [Nb,H]       encoder.block.0.layer.0.SelfAttention.relative_attention_bias.weight
//   encoder.blocks.i.norm1.gain               encoder.block.i.layer.0.layer_norm.weight
//   encoder.blocks.i.attn.{q,k,v,o}.weight    encoder.block.i.layer.0.SelfAttention.{q,k,v,o}.weight (q ×1/√Dh)
//   encoder.blocks.i.norm2.gain               encoder.block.i.layer.1.layer_norm.weight
//   encoder.blocks.i.ffn.{fc|gate,fc},proj    encoder.block.i.layer.1.DenseReluDense.{wi|wi_0,wi_1},wo
//   encoder.norm_f.gain                       encoder.final_layer_norm.weight
//   decoder.relative_bias.weight              decoder.block.0.layer.0.SelfAttention.relative_attention_bias.weight
//   decoder.blocks.i.norm1.gain               decoder.block.i.layer.0.layer_norm.weight
//   decoder.blocks.i.self_attn.{q,k,v,o}      decoder.block.i.layer.0.SelfAttention.{q,k,v,o}.weight (q ×1/√Dh)
//   decoder.blocks.i.norm_cross.gain          decoder.block.i.layer.1.layer_norm.weight
//   decoder.blocks.i.cross_attn.qkv.weight    decoder.block.i.layer.1.EncDecAttention.{q (×1/√Dh),k,v}.weight
//   decoder.blocks.i.cross_attn.proj.weight   decoder.block.i.layer.1.EncDecAttention.o.weight
//   decoder.blocks.i.norm2.gain               decoder.block.i.layer.2.layer_norm.weight
//   decoder.blocks.i.ffn.*                    decoder.block.i.layer.2.DenseReluDense.*
//   decoder.norm_f.gain                       decoder.final_layer_norm.weight
//   head.weight (untied)                      lm_head.weight
// clang-format on
#pragma once

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "interop/hf_architecture.hpp"
#include "interop/hf_tensors.hpp"
#include "model/encoder_decoder.hpp"

namespace patchbay::interop {

// The T5 shape (family kT5) of an encoder-decoder, or Error(kInvalidArgument) naming what
// T5ForConditionalGeneration cannot express. `components` as for hf_shape_of_model.
HfModelShape t5_shape_of_model(const model::EncoderDecoderOptions& options,
                               const model::ComponentTables& tables,
                               const std::vector<UsedComponent>& components);

nlohmann::json t5_config_json(const HfModelShape& shape);
nlohmann::json t5_generation_config_json(const HfModelShape& shape);

// Import: the shape a config.json with model_type "t5" describes; Error(kInvalidArgument)
// naming the field without a Patchbay counterpart (d_kv != d_model / num_heads,
// is_decoder, ...).
HfModelShape t5_shape_from_config_json(const nlohmann::json& config);

// [model] (architecture = "encoder_decoder"), [model.attention] (dense, bias = false) and
// [model.feedforward] (mlp, bias = false) for the shape.
std::string t5_model_toml(const HfModelShape& shape);

// Every Patchbay parameter of the shape's model with its HF parts (table above).
std::vector<TensorRule> t5_tensor_rules(const HfModelShape& shape);

// HF tensor names T5 checkpoints may hold that carry nothing of their own (the stacks' copies
// of shared.weight, the unused cross-attention bias table some versions save).
bool t5_ignorable_tensor(const std::string& name);

}  // namespace patchbay::interop
