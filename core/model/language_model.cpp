// LanguageModel (see language_model.hpp): forward, incremental decoding, parameters,
// counts. Building (options checks, plugin layers, initialisation) is in model_build.cpp;
// the shared state of both files is model_impl.hpp.
#include <cmath>
#include <sstream>

#include "common/error.hpp"
#include "engine/ops.hpp"
#include "model/encoder_decoder.hpp"
#include "model/model_impl.hpp"

namespace patchbay::model {

namespace eng = engine;

// ---- DecodeState ----

DecodeState::DecodeState() = default;
DecodeState::~DecodeState() = default;
DecodeState::DecodeState(DecodeState&&) noexcept = default;
DecodeState& DecodeState::operator=(DecodeState&&) noexcept = default;
int64_t DecodeState::batch() const { return impl_ ? impl_->batch : 0; }
int64_t DecodeState::capacity() const { return impl_ ? impl_->capacity : 0; }
int64_t DecodeState::length() const { return impl_ ? impl_->length : 0; }

// ---- LanguageModel::Impl ----

eng::Tensor LanguageModel::Impl::norm(const Norm& n, const eng::Tensor& x) const {
  return options.norm == NormKind::kRmsNorm ? eng::rms_norm(x, n.gain, options.norm_eps)
                                            : eng::layer_norm(x, n.gain, n.bias, options.norm_eps);
}

eng::Tensor LanguageModel::Impl::embed(const eng::Tensor& tokens, int64_t position_offset,
                                       bool training, const eng::Tensor* positions) {
  const int64_t t = tokens.size(1);
  // [B, T, C]; f32 also when wte holds bf16 (convert_weights_for_inference): exact widening.
  // Tokens made on the host move to the model's device (queued, no wait).
  eng::Tensor x = eng::embedding(wte, tokens.to(wte.device())).to(eng::DType::kF32);
  if (const double scale = resolved_embedding_scale(options); scale != 1.0)
    x = eng::mul_scalar(x, scale);  // sqrt(d_model) with sinusoidal positions by default
  if (positions != nullptr && (options.positional == PositionalKind::kLearned ||
                               options.positional == PositionalKind::kSinusoidal)) {
    // Packed rows: each token's own position within its segment, [B, T, C].
    const eng::Tensor& table = options.positional == PositionalKind::kLearned ? wpe : sinusoid;
    x = x + eng::embedding(table, positions->to(table.device()));
  } else if (options.positional == PositionalKind::kLearned) {
    x = x + eng::narrow(wpe, 0, position_offset, t);  // [T, C] broadcast over B
  } else if (options.positional == PositionalKind::kSinusoidal) {
    x = x + eng::narrow(sinusoid, 0, position_offset, t);
  }
  return eng::dropout(x, options.dropout, dropout_generator, training && options.dropout > 0);
}

eng::Tensor LanguageModel::Impl::head_logits(const eng::Tensor& x) const {
  const int64_t b = x.size(0), t = x.size(1), c = x.size(2);
  const eng::Tensor rows = eng::reshape(x, {b * t, c});
  const eng::Tensor logits =
      eng::matmul(rows, options.tie_embeddings ? wte : head, false, true);  // [B*T, V]
  return eng::reshape(logits, {b, t, options.vocab_size});
}

eng::Tensor LanguageModel::Impl::residual_dropout(const eng::Tensor& branch, bool training) {
  return eng::dropout(branch, options.dropout, dropout_generator, training && options.dropout > 0);
}

// One block on x [B, T, C]. `state` is null for a whole-sequence forward, else the layer's
// decoding state (positions continue after what it holds).
eng::Tensor LanguageModel::Impl::block_forward(size_t index, const eng::Tensor& x, bool training,
                                               runtime::AttentionHandle::State* state,
                                               ForwardResult* result, eng::Tensor* normed) {
  Block& block = blocks[index];
  auto attend = [&](const eng::Tensor& h) {
    if (state != nullptr) return block.attn->forward_step(*state, h);
    return packed_segments != nullptr ? block.attn->forward_packed(h, *packed_segments, training)
                                      : block.attn->forward(h, training);
  };
  auto feed_forward = [&](const eng::Tensor& h) {
    runtime::FeedForwardHandle::Output out = block.ffn->forward(h, training);
    if (result != nullptr) {
      if (out.aux_loss.defined()) {
        const eng::Tensor aux = eng::reshape(out.aux_loss.to(eng::DType::kF32), {});
        result->aux_loss = result->aux_loss.defined() ? result->aux_loss + aux : aux;
      }
      for (runtime::FeedForwardHandle::Stat& s : out.stats) {
        result->stats.emplace_back("blocks." + std::to_string(index) + ".ffn." + s.name,
                                   std::move(s.values));
      }
    }
    return out.y;
  };
  if (options.pre_norm && options.norm == NormKind::kLayerNorm && normed != nullptr) {
    // x -> h = x + attn(norm1(x)) -> out = h + ffn(norm2(h)), with each residual add fused
    // with the layer norm that reads its sum: norm2(h), then the next norm of out.
    auto add_norm = [&](const Norm& n, const eng::Tensor& a, const eng::Tensor& b) {
      return eng::add_layer_norm(a, b, n.gain, n.bias, options.norm_eps);
    };
    const eng::Tensor n1 = normed->defined() ? *normed : norm(block.norm1, x);
    auto [h, n2] = add_norm(block.norm2, x, residual_dropout(attend(n1), training));
    const Norm& next = index + 1 < blocks.size() ? blocks[index + 1].norm1 : norm_f;
    auto [out, next_normed] = add_norm(next, h, residual_dropout(feed_forward(n2), training));
    *normed = next_normed;
    return out;
  }
  if (options.pre_norm) {
    eng::Tensor h = x + residual_dropout(attend(norm(block.norm1, x)), training);
    return h + residual_dropout(feed_forward(norm(block.norm2, h)), training);
  }
  eng::Tensor h = norm(block.norm1, x + residual_dropout(attend(x), training));
  return norm(block.norm2, h + residual_dropout(feed_forward(h), training));
}

void LanguageModel::Impl::check_tokens(const eng::Tensor& tokens, const char* what) const {
  if (!tokens.defined() || tokens.dim() != 2 ||
      (tokens.dtype() != eng::DType::kI32 && tokens.dtype() != eng::DType::kI64)) {
    throw Error(ErrorKind::kInvalidArgument,
                std::string(what) + ": expected tokens [B, T] of i32 or i64, found " +
                    (tokens.defined() ? tokens.str() : std::string("an undefined tensor")));
  }
  if (tokens.size(0) < 1 || tokens.size(1) < 1) {
    throw Error(ErrorKind::kInvalidArgument,
                std::string(what) + ": tokens " + tokens.str() + " are empty");
  }
}

// ---- LanguageModel ----

LanguageModel::LanguageModel(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
LanguageModel::~LanguageModel() = default;

const ModelOptions& LanguageModel::options() const { return impl_->options; }

ForwardResult LanguageModel::forward(const eng::Tensor& tokens, bool training) {
  Impl& m = *impl_;
  if (m.encoder_decoder)
    throw Error(ErrorKind::kInvalidArgument,
                "LanguageModel::forward: this is an encoder-decoder (model.architecture = "
                "\"encoder_decoder\"), which needs a source as well as decoder inputs; an "
                "objective that gives one (train.objective = \"span_corruption\") runs it");
  m.check_tokens(tokens, "LanguageModel::forward");
  if (tokens.size(1) > m.options.context_length) {
    throw Error(ErrorKind::kInvalidArgument,
                "LanguageModel::forward: " + std::to_string(tokens.size(1)) +
                    " positions exceed the context length " +
                    std::to_string(m.options.context_length) + " (model.context_length)");
  }
  ForwardResult result;
  eng::Tensor x = m.embed(tokens, 0, training);
  eng::Tensor normed;  // after the blocks, norm_f(x) when the last block made it
  if (m.options.reversible) {
    x = m.reversible_stack(x, training, nullptr);
  } else {
    for (size_t i = 0; i < m.blocks.size(); ++i)
      x = m.block_forward(i, x, training, nullptr, &result, &normed);
  }
  result.logits = m.head_logits(normed.defined() ? normed : m.norm(m.norm_f, x));
  return result;
}

void LanguageModel::require_packing() const {
  const Impl& m = *impl_;
  if (m.options.reversible)
    throw Error(ErrorKind::kInvalidArgument,
                "packed sequences are not implemented for [model] residual = \"reversible\" "
                "(its reconstructing backward runs the layers' plain forward); turn packing off "
                "or use the standard residual");
  for (const Block& block : m.blocks) block.attn->require_packed();
}

ForwardResult LanguageModel::forward_packed(const eng::Tensor& tokens,
                                            const eng::Tensor& segment_ids, bool training) {
  Impl& m = *impl_;
  m.check_tokens(tokens, "LanguageModel::forward_packed");
  require_packing();
  if (!segment_ids.defined() || segment_ids.dim() != 2 || segment_ids.size(0) != tokens.size(0) ||
      segment_ids.size(1) != tokens.size(1) ||
      (segment_ids.dtype() != eng::DType::kI32 && segment_ids.dtype() != eng::DType::kI64))
    throw Error(ErrorKind::kInvalidArgument,
                "LanguageModel::forward_packed: expected segment_ids [B, T] of i32 or i64 "
                "matching the tokens " +
                    tokens.str() + ", found " +
                    (segment_ids.defined() ? segment_ids.str() : std::string("none")));
  if (tokens.size(1) > m.options.context_length)
    throw Error(ErrorKind::kInvalidArgument,
                "LanguageModel::forward_packed: " + std::to_string(tokens.size(1)) +
                    " positions exceed the context length " +
                    std::to_string(m.options.context_length) + " (model.context_length)");
  const eng::Tensor ids = segment_ids.to(eng::cpu()).to(eng::DType::kI64).contiguous();
  const int64_t b = ids.size(0), t = ids.size(1);
  std::vector<int64_t> positions(static_cast<size_t>(b * t));
  const int64_t* id = ids.data<int64_t>();
  for (int64_t row = 0; row < b; ++row)
    for (int64_t j = 0; j < t; ++j) {
      const size_t i = static_cast<size_t>(row * t + j);
      if (j > 0 && id[i] < id[i - 1])
        throw Error(ErrorKind::kInvalidArgument,
                    "LanguageModel::forward_packed: segment_ids must be non-decreasing along "
                    "each row (each example one contiguous run); row " +
                        std::to_string(row) + " goes from " + std::to_string(id[i - 1]) + " to " +
                        std::to_string(id[i]) + " at position " + std::to_string(j));
      positions[i] = j > 0 && id[i] == id[i - 1] ? positions[i - 1] + 1 : 0;
    }
  const eng::Tensor position_tensor =
      eng::Tensor::from_data(positions.data(), {b, t}, eng::DType::kI64);
  // Every attention layer reads the ids for the duration of this forward only.
  struct Reset {
    Impl& m;
    ~Reset() { m.packed_segments = nullptr; }
  } reset{m};
  m.packed_segments = &ids;
  ForwardResult result;
  eng::Tensor x = m.embed(tokens, 0, training, &position_tensor);
  eng::Tensor normed;
  for (size_t i = 0; i < m.blocks.size(); ++i)
    x = m.block_forward(i, x, training, nullptr, &result, &normed);
  result.logits = m.head_logits(normed.defined() ? normed : m.norm(m.norm_f, x));
  return result;
}

std::vector<NamedParameter> LanguageModel::parameters() const { return impl_->parameters; }

const std::map<std::string, TensorParallelPartition>& LanguageModel::tensor_parallel_partitions()
    const {
  return impl_->tp_partitions;
}

int64_t LanguageModel::parameter_count(bool exclude_embeddings) const {
  int64_t total = 0;
  for (const NamedParameter& p : impl_->parameters) total += p.tensor.numel();
  if (exclude_embeddings) {
    total -= impl_->wte.numel();
    if (impl_->wpe.defined()) total -= impl_->wpe.numel();
  }
  return total;
}

double LanguageModel::flops_per_token(int64_t seq_len) const {
  const ModelOptions& o = impl_->options;
  // Matmul parameters: all but the embedding tables, plus the head (V x C, tied or not).
  double n = static_cast<double>(parameter_count(true));
  if (o.tie_embeddings) n += static_cast<double>(o.vocab_size) * static_cast<double>(o.d_model);
  return 6.0 * n + 12.0 * static_cast<double>(o.n_layers) * static_cast<double>(seq_len) *
                       static_cast<double>(o.d_model);
}

DecodeState LanguageModel::start_decoding(int64_t batch, int64_t capacity) {
  Impl& m = *impl_;
  if (batch < 1 || capacity < 1 || capacity > m.options.context_length) {
    throw Error(ErrorKind::kInvalidArgument,
                "start_decoding: need batch >= 1 and 1 <= capacity <= context_length (" +
                    std::to_string(m.options.context_length) + "), found batch " +
                    std::to_string(batch) + ", capacity " + std::to_string(capacity));
  }
  if (m.encoder_decoder)
    throw Error(ErrorKind::kInvalidArgument,
                "start_decoding: encoder-decoder decoding (the encoder once, then the decoder "
                "with its caches) is not built yet (docs/encoder_decoder.md)");
  if (!m.options.causal)
    throw Error(ErrorKind::kInvalidArgument,
                "start_decoding: this model is bidirectional (model.causal = false, a masked-LM "
                "encoder): every position was trained to see the tokens after it, so it cannot "
                "continue text left to right; generate with a causal model (model.causal = true, "
                "train.objective = \"clm\"), or use `patchbay eval` for masked-token loss and "
                "accuracy");
  DecodeState state;
  state.impl_ = std::make_unique<DecodeState::Impl>();
  state.impl_->owner = impl_.get();
  state.impl_->batch = batch;
  state.impl_->capacity = capacity;
  for (size_t i = 0; i < m.blocks.size(); ++i) {
    try {
      state.impl_->layers.push_back(m.blocks[i].attn->state_create(batch, capacity));
    } catch (const Error& e) {
      throw Error(e.kind(), "block " + std::to_string(i) + ": " + e.what());
    }
  }
  return state;
}

eng::Tensor LanguageModel::decode_step(DecodeState& state, const eng::Tensor& tokens,
                                       int64_t keep_last) {
  Impl& m = *impl_;
  m.check_tokens(tokens, "LanguageModel::decode_step");
  if (keep_last < 0 || keep_last > tokens.size(1))
    throw Error(ErrorKind::kInvalidArgument,
                "decode_step: keep_last must lie in [0, " + std::to_string(tokens.size(1)) +
                    "] (0 = every position), found " + std::to_string(keep_last));
  if (!state.impl_ || state.impl_->owner != impl_.get()) {
    throw Error(ErrorKind::kInvalidArgument,
                "decode_step: the state was not made by this model's start_decoding");
  }
  DecodeState::Impl& s = *state.impl_;
  if (s.broken) {
    throw Error(ErrorKind::kInvalidArgument,
                "decode_step: an earlier step failed part-way, so the layers' caches disagree; "
                "start a new state");
  }
  if (tokens.size(0) != s.batch) {
    throw Error(
        ErrorKind::kInvalidArgument,
        "decode_step: tokens " + tokens.str() + " for a state of batch " + std::to_string(s.batch));
  }
  if (s.length + tokens.size(1) > s.capacity) {
    throw Error(ErrorKind::kInvalidArgument,
                "decode_step: " + std::to_string(tokens.size(1)) + " more positions after " +
                    std::to_string(s.length) + " exceed the state's capacity " +
                    std::to_string(s.capacity));
  }
  eng::NoGradGuard no_grad;
  s.broken = true;  // until every layer has taken the step
  eng::Tensor x = m.embed(tokens, s.length, false);
  eng::Tensor normed;  // after the blocks, norm_f(x) when the last block made it (as forward)
  if (m.options.reversible) {
    x = m.reversible_stack(x, false, &s.layers);
  } else {
    for (size_t i = 0; i < m.blocks.size(); ++i)
      x = m.block_forward(i, x, false, &s.layers[i], nullptr, &normed);
  }
  eng::Tensor last = normed.defined() ? normed : m.norm(m.norm_f, x);  // [B, Tn, C]
  if (keep_last > 0 && keep_last < last.size(1))
    last = eng::narrow(last, 1, last.size(1) - keep_last, keep_last).contiguous();
  eng::Tensor logits = m.head_logits(last);
  s.length += tokens.size(1);
  s.broken = false;
  return logits;
}

bool LanguageModel::reorder_decoding(DecodeState& state, std::span<const int64_t> source) {
  if (!state.impl_ || state.impl_->owner != impl_.get())
    throw Error(ErrorKind::kInvalidArgument,
                "reorder_decoding: the state was not made by this model's start_decoding");
  DecodeState::Impl& s = *state.impl_;
  if (static_cast<int64_t>(source.size()) != s.batch)
    throw Error(ErrorKind::kInvalidArgument, "reorder_decoding: " + std::to_string(source.size()) +
                                                 " sources for a state of batch " +
                                                 std::to_string(s.batch));
  for (int64_t index : source) {
    if (index < 0 || index >= s.batch)
      throw Error(ErrorKind::kInvalidArgument, "reorder_decoding: source " + std::to_string(index) +
                                                   " is not a sequence of the state (batch " +
                                                   std::to_string(s.batch) + ")");
  }
  if (s.broken)
    throw Error(ErrorKind::kInvalidArgument,
                "reorder_decoding: the state is broken; start a new one");
  const Impl& m = *impl_;
  s.broken = true;  // until every layer has reordered
  for (size_t i = 0; i < m.blocks.size(); ++i) {
    if (!m.blocks[i].attn->reorder_state(s.layers[i], source)) return false;
  }
  s.broken = false;
  return true;
}

std::optional<DecodeState> LanguageModel::fork_decoding(const DecodeState& state,
                                                        std::span<const int64_t> source) {
  if (!state.impl_ || state.impl_->owner != impl_.get())
    throw Error(ErrorKind::kInvalidArgument,
                "fork_decoding: the state was not made by this model's start_decoding");
  const DecodeState::Impl& s = *state.impl_;
  if (source.empty())
    throw Error(ErrorKind::kInvalidArgument, "fork_decoding: needs at least one source");
  for (int64_t index : source)
    if (index < 0 || index >= s.batch)
      throw Error(ErrorKind::kInvalidArgument, "fork_decoding: source " + std::to_string(index) +
                                                   " is not a sequence of the state (batch " +
                                                   std::to_string(s.batch) + ")");
  if (s.broken)
    throw Error(ErrorKind::kInvalidArgument, "fork_decoding: the state is broken; start a new one");
  DecodeState copy;
  copy.impl_ = std::make_unique<DecodeState::Impl>();
  copy.impl_->owner = s.owner;
  copy.impl_->batch = static_cast<int64_t>(source.size());
  copy.impl_->capacity = s.capacity;
  copy.impl_->length = s.length;
  eng::NoGradGuard no_grad;
  for (size_t i = 0; i < impl_->blocks.size(); ++i) {
    std::optional<runtime::AttentionHandle::State> layer =
        impl_->blocks[i].attn->fork_state(s.layers[i], source);
    if (!layer) return std::nullopt;
    copy.impl_->layers.push_back(std::move(*layer));
  }
  return copy;
}

std::string LanguageModel::describe() const {
  const Impl& m = *impl_;
  if (m.encoder_decoder) return m.encoder_decoder->describe();
  const ModelOptions& o = m.options;
  std::ostringstream out;
  out << (o.causal ? "GPT" : "bidirectional encoder (model.causal = false)") << ": vocab "
      << o.vocab_size << ", context " << o.context_length << ", " << o.n_layers << " blocks, "
      << o.n_heads << " heads, d_model " << o.d_model << ", d_ff " << o.d_ff << "\n";
  out << "  " << norm_kind_name(o.norm) << " (" << (o.pre_norm ? "pre" : "post")
      << "-norm), positions " << positional_kind_name(o.positional) << ", embeddings x"
      << resolved_embedding_scale(o) << ", head " << (o.tie_embeddings ? "tied to wte" : "untied")
      << ", dropout " << o.dropout << "\n";
  auto join = [](const std::vector<std::string>& names) {
    std::string s;
    for (const std::string& n : names) s += (s.empty() ? "" : ", ") + n;
    return s;
  };
  out << "  attention: " << join(o.attention_kinds)
      << (o.attention_kinds.size() > 1 ? " (cycled)" : "")
      << "; feed-forward: " << join(o.feedforward_kinds)
      << (o.feedforward_kinds.size() > 1 ? " (cycled)" : "") << "\n";
  out << "  parameters: " << parameter_count() << " (" << parameter_count(true)
      << " without embeddings)";
  return out.str();
}

}  // namespace patchbay::model
