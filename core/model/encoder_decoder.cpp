// EncoderDecoderModel (encoder_decoder.hpp): input checks, the encoder and decoder
// forwards, parameters and counts. Construction is encoder_decoder_build.cpp.
#include <cmath>
#include <sstream>

#include "common/error.hpp"
#include "engine/ops.hpp"
#include "model/encoder_decoder_impl.hpp"

namespace patchbay::model {

namespace eng = engine;

namespace {

void refuse(const std::string& message) {
  throw Error(ErrorKind::kInvalidArgument, "encoder-decoder: " + message);
}

void check_ids(const eng::Tensor& ids, const char* what, int64_t context, const char* key) {
  if (!ids.defined())
    refuse(std::string("no ") + what +
           " given: an encoder-decoder needs both a source (encoder input) and decoder inputs");
  if (ids.dim() != 2 || (ids.dtype() != eng::DType::kI32 && ids.dtype() != eng::DType::kI64))
    refuse(std::string(what) + ": expected ids [B, T] of i32 or i64, found " + ids.str());
  if (ids.size(0) < 1 || ids.size(1) < 1) refuse(std::string(what) + " " + ids.str() + " is empty");
  if (ids.size(1) > context)
    refuse(std::string(what) + " of " + std::to_string(ids.size(1)) +
           " positions exceeds the model's " + std::to_string(context) + " (" + key +
           "): longer inputs are refused, not truncated; shorten them or raise " + key);
}

void check_padding(const eng::Tensor& padding, const eng::Tensor& ids, const char* what) {
  if (!padding.defined()) return;
  if (padding.dim() != 2 || padding.size(0) != ids.size(0) || padding.size(1) != ids.size(1))
    refuse(std::string(what) + " padding mask " + padding.str() + " must have the ids' shape " +
           ids.str() + " (1 = token, 0 = padding)");
}

}  // namespace

eng::Tensor EncoderDecoderModel::Impl::norm(const Norm& n, const eng::Tensor& x) const {
  const ModelOptions& o = options.base;
  return o.norm == NormKind::kRmsNorm ? eng::rms_norm(x, n.gain, o.norm_eps)
                                      : eng::layer_norm(x, n.gain, n.bias, o.norm_eps);
}

eng::Tensor EncoderDecoderModel::Impl::dropout(const eng::Tensor& x, bool training) {
  const double p = options.base.dropout;
  return eng::dropout(x, p, dropout_generator, training && p > 0);
}

eng::Tensor EncoderDecoderModel::Impl::feed_forward(runtime::FeedForwardHandle& ffn,
                                                    const eng::Tensor& h, bool training,
                                                    const std::string& prefix,
                                                    ForwardResult* result) {
  runtime::FeedForwardHandle::Output out = ffn.forward(h, training);
  if (result != nullptr) {
    if (out.aux_loss.defined()) {
      const eng::Tensor aux = eng::reshape(out.aux_loss.to(eng::DType::kF32), {});
      result->aux_loss = result->aux_loss.defined() ? result->aux_loss + aux : aux;
    }
    for (runtime::FeedForwardHandle::Stat& s : out.stats)
      result->stats.emplace_back(prefix + ".ffn." + s.name, std::move(s.values));
  }
  return out.y;
}

EncoderDecoderModel::EncoderDecoderModel(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
EncoderDecoderModel::~EncoderDecoderModel() = default;

const EncoderDecoderOptions& EncoderDecoderModel::options() const { return impl_->options; }

eng::Tensor EncoderDecoderModel::Impl::run_encoder(const eng::Tensor& source,
                                                   const eng::Tensor& source_padding, bool training,
                                                   ForwardResult* result) {
  Impl& m = *this;
  check_ids(source, "source", m.options.source_context_length, "model.source_context_length");
  check_padding(source_padding, source, "source");
  const int64_t b = source.size(0), s = source.size(1);
  const eng::Tensor blocked = attention_blocked_mask(source_padding, b, s, s, false, 0);
  const eng::Tensor bias =
      m.encoder_bias.table.defined() ? m.encoder_bias.bias(s, s) : eng::Tensor();
  eng::Tensor x =
      m.dropout(eng::embedding(m.encoder_embed, source.to(m.encoder_embed.device())), training);
  for (size_t i = 0; i < m.encoder.size(); ++i) {
    EncoderBlock& block = m.encoder[i];
    x = x + m.dropout(block.attn->forward(m.norm(block.norm1, x), bias, blocked), training);
    x = x + m.dropout(m.feed_forward(*block.ffn, m.norm(block.norm2, x), training,
                                     "encoder.blocks." + std::to_string(i), result),
                      training);
  }
  return m.dropout(m.norm(m.encoder_norm, x), training);
}

void EncoderDecoderModel::Impl::run_decoder(const eng::Tensor& memory,
                                            const eng::Tensor& source_padding,
                                            const eng::Tensor& target_inputs,
                                            const eng::Tensor& target_padding, bool training,
                                            ForwardResult& result) {
  Impl& m = *this;
  const ModelOptions& o = m.options.base;
  check_ids(target_inputs, "decoder inputs", o.context_length, "model.context_length");
  check_padding(target_padding, target_inputs, "decoder input");
  if (!memory.defined() || memory.dim() != 3 || memory.size(0) != target_inputs.size(0) ||
      memory.size(2) != o.d_model)
    refuse("the encoder output " + (memory.defined() ? memory.str() : std::string("(none)")) +
           " does not match decoder inputs " + target_inputs.str() + " (expected [" +
           std::to_string(target_inputs.size(0)) + ", S, " + std::to_string(o.d_model) + "])");
  const int64_t b = target_inputs.size(0), t = target_inputs.size(1);
  const eng::Tensor blocked = attention_blocked_mask(target_padding, b, t, t, true, 0);
  const eng::Tensor bias =
      m.decoder_bias.table.defined() ? m.decoder_bias.bias(t, t) : eng::Tensor();
  // The cross-attention's key padding mask: [B, S] f32, 1 = attended.
  eng::Tensor memory_mask;
  if (source_padding.defined()) {
    if (source_padding.dim() != 2 || source_padding.size(0) != b ||
        source_padding.size(1) != memory.size(1))
      refuse("source padding mask " + source_padding.str() + " does not match the encoder output " +
             memory.str() + " (expected [B, S], 1 = token, 0 = padding)");
    memory_mask = source_padding.to(eng::DType::kF32).to(memory.device());
  }
  eng::Tensor x = m.dropout(
      eng::embedding(m.decoder_embed, target_inputs.to(m.decoder_embed.device())), training);
  for (size_t i = 0; i < m.decoder.size(); ++i) {
    DecoderBlock& block = m.decoder[i];
    x = x + m.dropout(block.self_attn->forward(m.norm(block.norm1, x), bias, blocked), training);
    const runtime::AttentionHandle::CrossMemory cross = block.cross_attn->cross_memory_create(
        memory, memory_mask.defined() ? &memory_mask : nullptr, training);
    x = x + m.dropout(block.cross_attn->forward_cross(m.norm(block.norm_cross, x), cross, training),
                      training);
    x = x + m.dropout(m.feed_forward(*block.ffn, m.norm(block.norm2, x), training,
                                     "decoder.blocks." + std::to_string(i), &result),
                      training);
  }
  result.logits = m.head_logits(m.dropout(m.norm(m.decoder_norm, x), training));
}

eng::Tensor EncoderDecoderModel::Impl::head_logits(const eng::Tensor& x) const {
  const ModelOptions& o = options.base;
  const int64_t b = x.size(0), t = x.size(1), c = o.d_model;
  eng::Tensor rows = eng::reshape(x, {b * t, c});
  if (o.tie_embeddings) rows = eng::mul_scalar(rows, 1.0 / std::sqrt(static_cast<double>(c)));
  return eng::reshape(eng::matmul(rows, o.tie_embeddings ? decoder_embed : head, false, true),
                      {b, t, o.vocab_size});
}

eng::Tensor EncoderDecoderModel::encode(const eng::Tensor& source,
                                        const eng::Tensor& source_padding, bool training) {
  return impl_->run_encoder(source, source_padding, training, nullptr);
}

ForwardResult EncoderDecoderModel::decode(const eng::Tensor& memory,
                                          const eng::Tensor& source_padding,
                                          const eng::Tensor& target_inputs,
                                          const eng::Tensor& target_padding, bool training) {
  ForwardResult result;
  impl_->run_decoder(memory, source_padding, target_inputs, target_padding, training, result);
  return result;
}

ForwardResult EncoderDecoderModel::forward(const Seq2SeqInputs& inputs, bool training) {
  check_ids(inputs.source, "source", impl_->options.source_context_length,
            "model.source_context_length");
  check_ids(inputs.target_inputs, "decoder inputs", impl_->options.base.context_length,
            "model.context_length");
  if (inputs.source.size(0) != inputs.target_inputs.size(0))
    refuse("source " + inputs.source.str() + " and decoder inputs " + inputs.target_inputs.str() +
           " hold different numbers of sequences");
  ForwardResult result;  // aux losses and stats of both stacks' feed-forward layers
  const eng::Tensor memory =
      impl_->run_encoder(inputs.source, inputs.source_padding, training, &result);
  impl_->run_decoder(memory, inputs.source_padding, inputs.target_inputs, inputs.target_padding,
                     training, result);
  return result;
}

std::vector<NamedParameter> EncoderDecoderModel::parameters() const { return impl_->parameters; }

int64_t EncoderDecoderModel::parameter_count() const {
  int64_t total = 0;
  for (const NamedParameter& p : impl_->parameters) total += p.tensor.numel();
  return total;
}

std::string EncoderDecoderModel::describe() const {
  const EncoderDecoderOptions& e = impl_->options;
  const ModelOptions& o = e.base;
  auto join = [](const std::vector<std::string>& names) {
    std::string s;
    for (const std::string& n : names) s += (s.empty() ? "" : ", ") + n;
    return s;
  };
  std::ostringstream out;
  out << "encoder-decoder: vocab " << o.vocab_size << ", source context " << e.source_context_length
      << ", target context " << o.context_length << ", " << e.encoder_layers << " + "
      << e.decoder_layers << " blocks, " << o.n_heads << " heads, d_model " << o.d_model
      << ", d_ff " << o.d_ff << "\n";
  out << "  " << norm_kind_name(o.norm) << " (pre-norm), positions "
      << (e.relative_bias ? "t5_relative (" + std::to_string(e.relative_buckets) + " buckets, " +
                                "max distance " + std::to_string(e.relative_max_distance) + ")"
                          : std::string("none"))
      << ", embeddings " << (e.shared_embeddings ? "shared" : "separate") << ", head "
      << (o.tie_embeddings ? "tied" : "untied") << ", dropout " << o.dropout << "\n";
  out << "  cross-attention: " << e.cross_attention << "; feed-forward: encoder "
      << join(e.encoder_feedforward) << ", decoder " << join(e.decoder_feedforward) << "\n";
  out << "  parameters: " << parameter_count();
  return out.str();
}

}  // namespace patchbay::model
