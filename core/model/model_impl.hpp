// The insides of LanguageModel and DecodeState, shared by language_model.cpp (forward,
// decoding, counts) and model_build.cpp (construction). Private to core/model.
#pragma once

#include <map>
#include <memory>
#include <vector>

#include "engine/generator.hpp"
#include "engine/tensor.hpp"
#include "model/language_model.hpp"
#include "runtime/attention_handle.hpp"
#include "runtime/feedforward_handle.hpp"

namespace patchbay::model {

// The components a layer section without `kind` uses (the schema defaults of
// model.attention.kind and model.feedforward.kind); flat keys of such a table are theirs.
inline constexpr const char* kDefaultAttentionKind = "dense";
inline constexpr const char* kDefaultFeedforwardKind = "mlp";

struct Norm {
  engine::Tensor gain;  // [C], starts at 1
  engine::Tensor bias;  // [C], starts at 0; undefined for RMSNorm
};

struct Block {
  Norm norm1, norm2;
  std::unique_ptr<runtime::AttentionHandle> attn;
  std::unique_ptr<runtime::FeedForwardHandle> ffn;
};

struct LanguageModel::Impl {
  ModelOptions options;
  engine::Tensor wte;       // [V, C]
  engine::Tensor wpe;       // [T_max, C], learned positions only
  engine::Tensor sinusoid;  // [T_max, C], sinusoidal positions only (constant, no grad)
  engine::Tensor head;      // [V, C], untied head only
  std::vector<Block> blocks;
  Norm norm_f;
  std::vector<NamedParameter> parameters;  // every parameter, in the documented order
  std::map<std::string, TensorParallelPartition> tp_partitions;  // tensor parallelism only
  engine::Generator dropout_generator;                           // model-level dropout masks
  // architecture = "encoder_decoder" only (encoder_decoder_language_model.cpp): the model
  // itself; the fields above then hold only options and parameters (its list).
  std::shared_ptr<EncoderDecoderModel> encoder_decoder;
  // Set by LanguageModel::forward_packed for the duration of its forward: the batch's segment
  // ids [B, T], which block_forward passes to every attention layer; null otherwise.
  const engine::Tensor* packed_segments = nullptr;
  // The weight matrices' dtype: f32, or bf16 after convert_weights_for_inference.
  engine::DType weights_dtype = engine::DType::kF32;

  engine::Tensor norm(const Norm& n, const engine::Tensor& x) const;
  // tokens [B, T] at positions offset.. -> [B, T, C] (token + absolute positions, dropout).
  // positions (packed forward): null, or integer [B, T] positions of each token (restarting
  // with each segment), used instead of offset + t for learned and sinusoidal positions.
  engine::Tensor embed(const engine::Tensor& tokens, int64_t position_offset, bool training,
                       const engine::Tensor* positions = nullptr);
  engine::Tensor head_logits(const engine::Tensor& x) const;  // [B, T, C] -> [B, T, V]
  engine::Tensor residual_dropout(const engine::Tensor& branch, bool training);
  // `normed` (optional, pre-norm layer norm only): on entry, when defined, the block's first
  // norm of x (made by the previous block); on exit, the next norm (the next block's first,
  // or the final norm after the last block) of the returned output: each residual add and the
  // norm after it run as one op (engine::add_layer_norm). Null: every norm runs on its own.
  engine::Tensor block_forward(size_t index, const engine::Tensor& x, bool training,
                               runtime::AttentionHandle::State* state, ForwardResult* result,
                               engine::Tensor* normed = nullptr);
  void check_tokens(const engine::Tensor& tokens, const char* what) const;
  // residual = "reversible" (reversible.cpp): the whole block stack on x [B, T, C]. With grad
  // recording on it is one engine custom op whose backward rebuilds the blocks' inputs;
  // `states` (decoding) is null or one per block.
  engine::Tensor reversible_stack(const engine::Tensor& x, bool training,
                                  std::vector<runtime::AttentionHandle::State>* states);
  // The two branches of block i: F = dropout(attn(norm1(h))), G = dropout(ffn(norm2(h))).
  engine::Tensor reversible_f(size_t index, const engine::Tensor& h, bool training,
                              runtime::AttentionHandle::State* state);
  engine::Tensor reversible_g(size_t index, const engine::Tensor& h, bool training);
};

struct DecodeState::Impl {
  const void* owner = nullptr;  // the LanguageModel::Impl that made it
  int64_t batch = 0;
  int64_t capacity = 0;
  int64_t length = 0;
  bool broken = false;  // a step failed part-way: the layers' states disagree
  std::vector<runtime::AttentionHandle::State> layers;  // one per block
};

}  // namespace patchbay::model
