// Encoder–decoder decoding (encoder_decoder.hpp): the encoder runs once, every decoder layer
// keeps its self-attention keys/values (RelativeSelfAttention::Cache) and a cross-attention
// memory made once from the encoder output; greedy decoding on top. No gradients.
#include <algorithm>
#include <span>
#include <vector>

#include "common/error.hpp"
#include "engine/ops.hpp"
#include "model/encoder_decoder_impl.hpp"

namespace patchbay::model {

namespace eng = engine;

Seq2SeqDecodeState::Seq2SeqDecodeState() = default;
Seq2SeqDecodeState::~Seq2SeqDecodeState() = default;
Seq2SeqDecodeState::Seq2SeqDecodeState(Seq2SeqDecodeState&&) noexcept = default;
Seq2SeqDecodeState& Seq2SeqDecodeState::operator=(Seq2SeqDecodeState&&) noexcept = default;
int64_t Seq2SeqDecodeState::batch() const { return impl_ ? impl_->batch : 0; }
int64_t Seq2SeqDecodeState::capacity() const { return impl_ ? impl_->capacity : 0; }
int64_t Seq2SeqDecodeState::length() const { return impl_ ? impl_->length : 0; }

namespace {

void refuse_decoding(const std::string& message) {
  throw Error(ErrorKind::kInvalidArgument, "encoder-decoder decoding: " + message);
}

}  // namespace

namespace {

// Rows `source` of x along dim 0 (a batch reorder; no gradients).
eng::Tensor select_rows(const eng::Tensor& x, std::span<const int64_t> source) {
  std::vector<eng::Tensor> rows;
  rows.reserve(source.size());
  for (const int64_t r : source) rows.push_back(eng::narrow(x, 0, r, 1));
  return eng::contiguous(eng::concat(rows, 0));
}

}  // namespace

void EncoderDecoderModel::check_decoding_capacity(int64_t capacity) const {
  const int64_t limit = impl_->options.base.context_length;
  if (capacity < 1 || capacity > limit)
    refuse_decoding("capacity " + std::to_string(capacity) + " outside [1, " +
                    std::to_string(limit) + "] (model.context_length)");
}

Seq2SeqDecodeState EncoderDecoderModel::decoding_state(eng::Tensor memory, eng::Tensor mask,
                                                       int64_t capacity, bool shared_source) {
  Seq2SeqDecodeState state;
  state.impl_ = std::make_unique<Seq2SeqDecodeState::Impl>();
  Seq2SeqDecodeState::Impl& s = *state.impl_;
  s.owner = impl_.get();
  s.memory = std::move(memory);
  s.source_mask = std::move(mask);
  s.batch = s.memory.size(0);
  s.capacity = capacity;
  s.shared_source = shared_source;
  for (DecoderBlock& block : impl_->decoder) {
    s.self_caches.emplace_back();
    s.cross_memories.push_back(block.cross_attn->cross_memory_create(
        s.memory, s.source_mask.defined() ? &s.source_mask : nullptr, false));
  }
  return state;
}

Seq2SeqDecodeState EncoderDecoderModel::start_decoding(const eng::Tensor& source,
                                                       const eng::Tensor& source_padding,
                                                       int64_t capacity) {
  check_decoding_capacity(capacity);
  eng::NoGradGuard no_grad;
  eng::Tensor memory = impl_->run_encoder(source, source_padding, false, nullptr);
  eng::Tensor mask = source_padding.defined()
                         ? source_padding.to(eng::DType::kF32).to(memory.device())
                         : eng::Tensor();
  return decoding_state(std::move(memory), std::move(mask), capacity, false);
}

Seq2SeqDecodeState EncoderDecoderModel::start_decoding_shared(const eng::Tensor& source,
                                                              const eng::Tensor& source_padding,
                                                              int64_t capacity, int64_t rows) {
  check_decoding_capacity(capacity);
  if (rows < 1) refuse_decoding("rows " + std::to_string(rows) + " < 1");
  if (!source.defined() || source.dim() != 2 || source.size(0) != 1)
    refuse_decoding("a shared source is one sequence [1, S], found " +
                    (source.defined() ? source.str() : std::string("none")));
  eng::NoGradGuard no_grad;
  // The encoder runs on the one source; its output is broadcast to the decoder's rows.
  const eng::Tensor one = impl_->run_encoder(source, source_padding, false, nullptr);
  eng::Tensor memory = eng::contiguous(eng::expand(one, {rows, one.size(1), one.size(2)}));
  eng::Tensor mask;
  if (source_padding.defined()) {
    const eng::Tensor m = source_padding.to(eng::DType::kF32).to(memory.device());
    mask = eng::contiguous(eng::expand(m, {rows, m.size(1)}));
  }
  return decoding_state(std::move(memory), std::move(mask), capacity, true);
}

void EncoderDecoderModel::reorder_decoding(Seq2SeqDecodeState& state,
                                           std::span<const int64_t> source) {
  if (!state.impl_ || state.impl_->owner != impl_.get())
    refuse_decoding("the state was not made by this model's start_decoding");
  Seq2SeqDecodeState::Impl& s = *state.impl_;
  if (s.broken) refuse_decoding("an earlier step failed part-way; start a new state");
  if (static_cast<int64_t>(source.size()) != s.batch)
    refuse_decoding("reorder: " + std::to_string(source.size()) + " source rows for a state of " +
                    std::to_string(s.batch));
  for (const int64_t r : source)
    if (r < 0 || r >= s.batch)
      refuse_decoding("reorder: source row " + std::to_string(r) + " outside [0, " +
                      std::to_string(s.batch) + ")");
  eng::NoGradGuard no_grad;
  s.broken = true;  // until every layer has reordered
  for (RelativeSelfAttention::Cache& cache : s.self_caches) {
    if (!cache.k.defined()) continue;  // nothing decoded yet
    cache.k = select_rows(cache.k, source);
    cache.v = select_rows(cache.v, source);
  }
  if (!s.shared_source) {
    s.memory = select_rows(s.memory, source);
    if (s.source_mask.defined()) s.source_mask = select_rows(s.source_mask, source);
    for (size_t i = 0; i < impl_->decoder.size(); ++i)
      s.cross_memories[i] = impl_->decoder[i].cross_attn->cross_memory_create(
          s.memory, s.source_mask.defined() ? &s.source_mask : nullptr, false);
  }
  s.broken = false;
}

eng::Tensor EncoderDecoderModel::decode_step(Seq2SeqDecodeState& state, const eng::Tensor& tokens) {
  Impl& m = *impl_;
  if (!state.impl_ || state.impl_->owner != impl_.get())
    refuse_decoding("the state was not made by this model's start_decoding");
  Seq2SeqDecodeState::Impl& s = *state.impl_;
  if (s.broken) refuse_decoding("an earlier step failed part-way; start a new state");
  if (!tokens.defined() || tokens.dim() != 2 || tokens.size(0) != s.batch || tokens.size(1) < 1 ||
      (tokens.dtype() != eng::DType::kI32 && tokens.dtype() != eng::DType::kI64))
    refuse_decoding("expected tokens [" + std::to_string(s.batch) + ", Tn] of i32 or i64, found " +
                    (tokens.defined() ? tokens.str() : std::string("none")));
  const int64_t tn = tokens.size(1), past = s.length;
  if (past + tn > s.capacity)
    refuse_decoding(std::to_string(tn) + " more positions after " + std::to_string(past) +
                    " exceed the state's capacity " + std::to_string(s.capacity));
  eng::NoGradGuard no_grad;
  s.broken = true;  // until every layer has taken the step
  const eng::Tensor bias =
      m.decoder_bias.table.defined() ? m.decoder_bias.bias(tn, past + tn, past) : eng::Tensor();
  const eng::Tensor blocked =
      tn > 1 ? attention_blocked_mask(eng::Tensor(), 1, tn, past + tn, true, past) : eng::Tensor();
  eng::Tensor x = eng::embedding(m.decoder_embed, tokens.to(m.decoder_embed.device()));
  for (size_t i = 0; i < m.decoder.size(); ++i) {
    DecoderBlock& block = m.decoder[i];
    x = x +
        block.self_attn->forward_cached(m.norm(block.norm1, x), s.self_caches[i], bias, blocked);
    x = x +
        block.cross_attn->forward_cross(m.norm(block.norm_cross, x), s.cross_memories[i], false);
    x = x + m.feed_forward(*block.ffn, m.norm(block.norm2, x), false, "", nullptr);
  }
  eng::Tensor logits = m.head_logits(m.norm(m.decoder_norm, x));
  s.length += tn;
  s.broken = false;
  return logits;
}

std::vector<std::vector<int32_t>> EncoderDecoderModel::greedy_decode(
    const eng::Tensor& source, const eng::Tensor& source_padding, int32_t start_id, int32_t eos_id,
    int64_t max_new) {
  const int64_t vocab = impl_->options.base.vocab_size;
  if (start_id < 0 || start_id >= vocab)
    refuse_decoding("start id " + std::to_string(start_id) + " outside the vocabulary");
  Seq2SeqDecodeState state = start_decoding(source, source_padding, max_new);
  const int64_t b = state.batch();
  std::vector<std::vector<int32_t>> out(static_cast<size_t>(b));
  std::vector<int32_t> next(static_cast<size_t>(b), start_id);
  std::vector<bool> done(static_cast<size_t>(b), false);
  for (int64_t step = 0; step < max_new; ++step) {
    const eng::Tensor logits =
        decode_step(state, eng::Tensor::from_data(next.data(), {b, 1}, eng::DType::kI32));
    const std::vector<float> values = logits.to(eng::cpu()).to_vector();  // [B, 1, V]
    bool all_done = true;
    for (int64_t r = 0; r < b; ++r) {
      const auto row = values.begin() + r * vocab;
      const int32_t best = static_cast<int32_t>(std::max_element(row, row + vocab) - row);
      next[static_cast<size_t>(r)] = best;
      if (done[static_cast<size_t>(r)]) continue;
      out[static_cast<size_t>(r)].push_back(best);
      done[static_cast<size_t>(r)] = best == eos_id;
      all_done = all_done && done[static_cast<size_t>(r)];
    }
    if (all_done) break;
  }
  return out;
}

}  // namespace patchbay::model
