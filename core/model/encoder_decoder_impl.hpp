// The insides of EncoderDecoderModel, shared by encoder_decoder.cpp (forward, counts) and
// encoder_decoder_build.cpp (construction). Private to core/model.
#pragma once

#include <memory>
#include <vector>

#include "engine/generator.hpp"
#include "model/encoder_decoder.hpp"
#include "model/model_impl.hpp"
#include "model/relative_attention.hpp"
#include "runtime/attention_handle.hpp"
#include "runtime/feedforward_handle.hpp"

namespace patchbay::model {

struct EncoderBlock {
  Norm norm1, norm2;
  std::unique_ptr<RelativeSelfAttention> attn;
  std::unique_ptr<runtime::FeedForwardHandle> ffn;
};

struct DecoderBlock {
  Norm norm1, norm_cross, norm2;
  std::unique_ptr<RelativeSelfAttention> self_attn;
  std::unique_ptr<runtime::AttentionHandle> cross_attn;
  std::unique_ptr<runtime::FeedForwardHandle> ffn;
};

struct EncoderDecoderModel::Impl {
  EncoderDecoderOptions options;
  engine::Tensor encoder_embed;  // [V, C]; the same tensor as decoder_embed when shared
  engine::Tensor decoder_embed;  // [V, C]
  engine::Tensor head;           // [V, C], untied only
  RelativePositionBias encoder_bias, decoder_bias;  // tables undefined without t5_relative
  std::vector<EncoderBlock> encoder;
  std::vector<DecoderBlock> decoder;
  Norm encoder_norm, decoder_norm;
  std::vector<NamedParameter> parameters;
  engine::Generator dropout_generator;

  // The encoder: memory [B, S, C]; feed-forward aux losses / stats into result when not null.
  engine::Tensor run_encoder(const engine::Tensor& source, const engine::Tensor& source_padding,
                             bool training, ForwardResult* result);
  // The decoder: result.logits [B, T, V], plus its feed-forward aux losses and stats.
  void run_decoder(const engine::Tensor& memory, const engine::Tensor& source_padding,
                   const engine::Tensor& target_inputs, const engine::Tensor& target_padding,
                   bool training, ForwardResult& result);
  // x [B, T, C] after the decoder's final norm -> logits [B, T, V] (tied: x·C^-1/2·embᵀ).
  engine::Tensor head_logits(const engine::Tensor& x) const;
  engine::Tensor norm(const Norm& n, const engine::Tensor& x) const;
  engine::Tensor dropout(const engine::Tensor& x, bool training);
  // The feed-forward branch; adds its aux loss and stats (named <prefix>.ffn.<stat>) to result.
  engine::Tensor feed_forward(runtime::FeedForwardHandle& ffn, const engine::Tensor& h,
                              bool training, const std::string& prefix, ForwardResult* result);
};

struct Seq2SeqDecodeState::Impl {
  const void* owner = nullptr;  // the EncoderDecoderModel::Impl that made it
  int64_t batch = 0, capacity = 0, length = 0;
  bool broken = false;         // a step failed part-way: the layers' caches disagree
  bool shared_source = false;  // start_decoding_shared: every row reads one source
  engine::Tensor memory;       // [B, S, C]
  engine::Tensor source_mask;  // [B, S] f32 on the memory's device, or undefined
  std::vector<RelativeSelfAttention::Cache> self_caches;              // one per decoder block
  std::vector<runtime::AttentionHandle::CrossMemory> cross_memories;  // one per decoder block
};

}  // namespace patchbay::model
