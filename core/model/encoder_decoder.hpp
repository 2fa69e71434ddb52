// The encoder–decoder (T5-shaped) model: `[model] architecture = "encoder_decoder"`, a peer
// of the single-stack LanguageModel (language_model.hpp), assembled from the same plugin
// feed-forward layers, plugin cross-attention (attention interface 1.3) and engine ops.
//
//   source [B, S] -> emb [V, C] -> dropout -> Le encoder blocks -> norm -> memory [B, S, C]
//     encoder block:  x += drop(self_attn(norm1(x)))   bidirectional, source padding masked
//                     x += drop(ffn(norm2(x)))
//   target_inputs [B, T] -> emb (shared with the encoder, or its own) -> dropout
//     -> Ld decoder blocks -> norm -> head -> logits [B, T, V] f32
//     decoder block:  x += drop(self_attn(norm1(x)))   causal, target padding masked
//                     x += drop(cross_attn(norm_cross(x), memory))  source padding masked
//                     x += drop(ffn(norm2(x)))
//   norms: pre-norm RMS norm with a gain and no bias (T5), or layer norm (model.norm).
//   self-attention: RelativeSelfAttention (relative_attention.hpp): q, k, v, o without
//     biases, scores + T5's relative position bias (positional = "t5_relative": one learned
//     [buckets, H] table per stack, bidirectional buckets in the encoder, causal in the
//     decoder; positional = "none": no positions). Composed from engine ops.
//   cross-attention: a plugin kind declaring PB_ATTENTION_CAP_CROSS (model.cross_attention:
//     dense, linear, performer); its memory (keys/values of the encoder output) is made once
//     per forward. Other kinds are refused at build, by name.
//   feed-forward: any plugin kind per stack (model.encoder_feedforward /
//     model.decoder_feedforward, each cycled over its stack; default model.feedforward's);
//     the decoder's must declare PB_FEEDFORWARD_CAP_CAUSAL (expert choice would leak).
//   head: tied to the decoder's embedding (logits = (x · C^-1/2) · embᵀ, T5's rescaling) or
//     its own head.weight [V, C].
//
// Parameter names (checkpoint keys), in this order:
//   shared.weight (shared embeddings) | encoder.embed.weight, decoder.embed.weight
//   encoder.relative_bias.weight [buckets, H] (t5_relative only)
//   encoder.blocks.<i>.norm1.{gain,bias}, .attn.{q,k,v,o}.weight, .norm2.*, .ffn.<plugin's>
//   encoder.norm_f.*
//   decoder.relative_bias.weight
//   decoder.blocks.<i>.norm1.*, .self_attn.{q,k,v,o}.weight, .norm_cross.*,
//     .cross_attn.<plugin's>, .norm2.*, .ffn.<plugin's>
//   decoder.norm_f.*, head.weight (untied only)
// (.bias entries exist for layer norm only.) Equal options and plugins give bit-identical
// models. One thread at a time per model.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "engine/tensor.hpp"
#include "model/language_model.hpp"

namespace patchbay::model {

struct EncoderDecoderOptions {
  // vocab_size, context_length (decoder positions), n_heads, d_model, d_ff, norm (pre-norm
  // only), init_std, norm_eps, dropout, seed, tie_embeddings, feedforward_kinds (the default
  // of both stacks) and the component tables apply as in the single-stack model;
  // n_layers, positional, attention_kinds, causal, reversible and tensor parallelism do not.
  ModelOptions base;
  int64_t encoder_layers = 2;
  int64_t decoder_layers = 2;
  int64_t source_context_length = 256;  // longest source the encoder reads
  bool shared_embeddings = true;        // one table embeds sources and decoder inputs
  bool relative_bias = true;            // positional = "t5_relative"; false = "none"
  int32_t relative_buckets = 32;        // T5: relative_attention_num_buckets
  int32_t relative_max_distance = 128;  // T5: relative_attention_max_distance
  std::string cross_attention = "dense";
  std::vector<std::string> encoder_feedforward;  // empty = base.feedforward_kinds
  std::vector<std::string> decoder_feedforward;  // empty = base.feedforward_kinds
};

// One batch of the model's inputs. Padding masks: 1 = a real token, 0 = padding (the
// `attention_mask` convention of transformers); undefined = nothing padded.
struct Seq2SeqInputs {
  engine::Tensor source;          // [B, S] i32|i64
  engine::Tensor source_padding;  // [B, S] any dtype, or undefined
  engine::Tensor target_inputs;   // [B, T] i32|i64: the targets shifted right (start token first)
  engine::Tensor target_padding;  // [B, T] or undefined
};

// Incremental decoding state of an EncoderDecoderModel (start_decoding): the encoder output
// and, per decoder layer, its self-attention keys/values so far and the cross-attention
// memory made once from the encoder output. Move-only; used with the model that made it.
class Seq2SeqDecodeState {
 public:
  Seq2SeqDecodeState();
  ~Seq2SeqDecodeState();
  Seq2SeqDecodeState(Seq2SeqDecodeState&&) noexcept;
  Seq2SeqDecodeState& operator=(Seq2SeqDecodeState&&) noexcept;
  int64_t batch() const;
  int64_t capacity() const;
  int64_t length() const;  // decoder positions already decoded

 private:
  friend class EncoderDecoderModel;
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

class EncoderDecoderModel {
 public:
  // Creates every layer through `registry` (alive as long as the model). Throws
  // Error(kInvalidArgument) naming the key for inconsistent options, a cross-attention kind
  // without PB_ATTENTION_CAP_CROSS, a decoder feed-forward that mixes positions;
  // Error(kNotFound) for an unknown component.
  static std::unique_ptr<EncoderDecoderModel> build(const EncoderDecoderOptions& options,
                                                    const ComponentTables& tables,
                                                    runtime::Registry& registry);
  ~EncoderDecoderModel();
  EncoderDecoderModel(const EncoderDecoderModel&) = delete;
  EncoderDecoderModel& operator=(const EncoderDecoderModel&) = delete;

  // Encoder then decoder; logits [B, T, V] f32 for every decoder position. Throws
  // Error(kInvalidArgument) for a missing source, batch sizes that differ, lengths past the
  // context lengths (model.source_context_length / model.context_length: refused, not
  // truncated), padding masks of another shape.
  ForwardResult forward(const Seq2SeqInputs& inputs, bool training);
  // The encoder alone: memory [B, S, C] (after its final norm).
  engine::Tensor encode(const engine::Tensor& source, const engine::Tensor& source_padding,
                        bool training);
  // The decoder on a memory from encode(): logits [B, T, V].
  ForwardResult decode(const engine::Tensor& memory, const engine::Tensor& source_padding,
                       const engine::Tensor& target_inputs, const engine::Tensor& target_padding,
                       bool training);

  // Decoding (encoder_decoder_decode.cpp; no gradients): runs the encoder once on the
  // source and makes every cross-attention memory once. capacity: decoder positions, <=
  // model.context_length. Throws Error(kInvalidArgument) as forward() for bad sources.
  Seq2SeqDecodeState start_decoding(const engine::Tensor& source,
                                    const engine::Tensor& source_padding, int64_t capacity);
  // tokens [B, Tn] at decoder positions state.length() .. +Tn-1 -> logits [B, Tn, V], equal
  // (up to rounding) to forward()'s at those positions; the state advances.
  engine::Tensor decode_step(Seq2SeqDecodeState& state, const engine::Tensor& tokens);
  // Decoding rows that share one source (beam search, several samples of one source): the
  // encoder runs once on source [1, S] and its memory [1, S, C] is broadcast to `rows` decoder
  // rows; every row's cross-attention reads the same keys/values, so reorder_decoding leaves
  // them as they are. Throws as start_decoding, and for rows < 1 or a batch other than 1.
  Seq2SeqDecodeState start_decoding_shared(const engine::Tensor& source,
                                           const engine::Tensor& source_padding, int64_t capacity,
                                           int64_t rows);
  // Row i takes the decoder state of row source[i] (source.size() == state.batch(), each in
  // [0, batch)): every layer's self-attention keys/values; a state of distinct sources also
  // reorders its memory and remakes the cross-attention memories. Throws
  // Error(kInvalidArgument) for a bad source list or a state of another model.
  void reorder_decoding(Seq2SeqDecodeState& state, std::span<const int64_t> source);
  // Greedy decoding: each sequence starts with start_id and takes the highest logit until it
  // gives eos_id or max_new tokens. Returns the generated ids (eos included when given).
  std::vector<std::vector<int32_t>> greedy_decode(const engine::Tensor& source,
                                                  const engine::Tensor& source_padding,
                                                  int32_t start_id, int32_t eos_id,
                                                  int64_t max_new);

  std::vector<NamedParameter> parameters() const;
  int64_t parameter_count() const;
  const EncoderDecoderOptions& options() const;
  std::string describe() const;

 private:
  struct Impl;
  explicit EncoderDecoderModel(std::unique_ptr<Impl> impl);
  void check_decoding_capacity(int64_t capacity) const;
  // A state over an encoder output memory [B, S, C] and its f32 mask (or undefined).
  Seq2SeqDecodeState decoding_state(engine::Tensor memory, engine::Tensor mask, int64_t capacity,
                                    bool shared_source);
  std::unique_ptr<Impl> impl_;
};

// The options of a validated config with model.architecture = "encoder_decoder" (vocab_size
// from the tokenizer). Throws Error(kInvalidArgument) naming the key for what the
// encoder–decoder cannot take (post-norm, positional other than t5_relative / none,
// residual = "reversible", model.causal = false, an attention pattern).
EncoderDecoderOptions encoder_decoder_options_from_config(const config::ResolvedConfig& config,
                                                          int64_t vocab_size);

// model.architecture of a config: "single_stack" (default) or "encoder_decoder".
std::string model_architecture(const config::ResolvedConfig& config);

}  // namespace patchbay::model
