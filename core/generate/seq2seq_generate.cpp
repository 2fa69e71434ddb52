// Encoder-decoder decoding through the decoder-only seams (seq2seq_generate.hpp): a
// BeamDecoder over shared-source decoder rows, and the sampler chain's next() per step.
#include "generate/seq2seq_generate.hpp"

#include <algorithm>
#include <cmath>

#include "common/error.hpp"
#include "engine/ops.hpp"
#include "generate/logit_rows.hpp"

namespace patchbay::generate {
namespace {

namespace eng = engine;

void refuse(const std::string& message) {
  throw Error(ErrorKind::kInvalidArgument, "encoder-decoder decoding: " + message);
}

eng::Tensor one_row(std::span<const int32_t> ids) {
  return eng::Tensor::from_data(ids.data(), {1, static_cast<int64_t>(ids.size())},
                                eng::DType::kI32);
}

// log p of `token` under logits (a host row).
double log_probability(std::span<const float> logits, int32_t token) {
  const float m = *std::max_element(logits.begin(), logits.end());
  double sum = 0;
  for (const float v : logits) sum += std::exp(static_cast<double>(v - m));
  return static_cast<double>(logits[static_cast<size_t>(token)] - m) - std::log(sum);
}

void check_max_new(const model::EncoderDecoderModel& model, int64_t max_new, int64_t reserve) {
  const int64_t limit = model.options().base.context_length - reserve;
  if (max_new < 1 || max_new > limit)
    refuse("max_new_tokens " + std::to_string(max_new) + " outside [1, " + std::to_string(limit) +
           "] (model.context_length = " + std::to_string(model.options().base.context_length) +
           " decoder positions)");
}

}  // namespace

Seq2SeqTokens seq2seq_tokens(const runtime::TokenizerHandle& tokenizer, bool stop_at_special) {
  Seq2SeqTokens t;
  t.start_id = -1;
  // A sequence stops at "</s>" alone, as transformers stops at eos_token_id: span corruption's
  // sentinels and other special tokens are output as text. A tokenizer without "</s>" stops at
  // every special token.
  std::vector<int32_t> all_special;
  for (const runtime::SpecialTokenInfo& s : tokenizer.special_tokens()) {
    if (s.text == "<pad>") t.start_id = s.id;
    if (s.text == "</s>") t.stop_ids = {s.id};
    all_special.push_back(s.id);
  }
  if (t.stop_ids.empty()) t.stop_ids = all_special;
  if (!stop_at_special) t.stop_ids.clear();
  if (t.start_id < 0)
    refuse(
        "the run's tokenizer has no \"<pad>\" special token, the decoder's start token "
        "(train.objective = \"seq2seq\" or \"span_corruption\" add it)");
  return t;
}

std::vector<int32_t> encode_source(const model::EncoderDecoderModel& model,
                                   const runtime::TokenizerHandle& tokenizer,
                                   std::string_view source) {
  std::vector<int32_t> ids = tokenizer.encode(source);
  if (ids.empty()) refuse("the source is empty; give at least one character");
  const int64_t limit = model.options().source_context_length;
  if (static_cast<int64_t>(ids.size()) > limit)
    refuse("the source is " + std::to_string(ids.size()) +
           " tokens, more than model.source_context_length = " + std::to_string(limit) +
           "; sources are refused, not truncated: shorten it");
  return ids;
}

Seq2SeqBeamDecoder::Seq2SeqBeamDecoder(model::EncoderDecoderModel& model,
                                       std::vector<int32_t> source, int64_t capacity)
    : model_(model), source_(std::move(source)), capacity_(capacity) {
  if (source_.empty()) refuse("the source is empty");
}

std::vector<float> Seq2SeqBeamDecoder::prefill(std::span<const int32_t> prompt, int64_t beams) {
  state_ = model_.start_decoding_shared(one_row(source_), eng::Tensor(), capacity_, beams);
  const std::vector<std::vector<int32_t>> rows(static_cast<size_t>(beams),
                                               std::vector<int32_t>(prompt.begin(), prompt.end()));
  return last_logits_per_row(model_.decode_step(state_, token_rows(rows))).front();
}

void Seq2SeqBeamDecoder::reorder(std::span<const int64_t> source) {
  model_.reorder_decoding(state_, source);
}

std::vector<std::vector<float>> Seq2SeqBeamDecoder::step(std::span<const int32_t> tokens) {
  std::vector<std::vector<int32_t>> rows;
  rows.reserve(tokens.size());
  for (const int32_t t : tokens) rows.push_back({t});
  return last_logits_per_row(model_.decode_step(state_, token_rows(rows)));
}

Seq2SeqOutput seq2seq_sample(model::EncoderDecoderModel& model, std::span<const int32_t> source,
                             const Seq2SeqTokens& tokens, int64_t max_new_tokens,
                             runtime::SamplerChain& chain) {
  if (source.empty()) refuse("the source is empty");
  check_max_new(model, max_new_tokens, 0);
  chain.reset();
  model::Seq2SeqDecodeState state =
      model.start_decoding(one_row(source), eng::Tensor(), max_new_tokens);
  std::vector<int32_t> history{tokens.start_id};  // the chain's prompt: the start token
  Seq2SeqOutput out;
  std::vector<float> logits =
      last_logits_per_row(model.decode_step(state, one_row(history))).front();
  for (int64_t step = 0; step < max_new_tokens; ++step) {
    const int32_t token = chain.next(logits, history, 1);
    out.score += log_probability(logits, token);
    if (std::find(tokens.stop_ids.begin(), tokens.stop_ids.end(), token) != tokens.stop_ids.end()) {
      out.stopped = true;
      break;
    }
    out.tokens.push_back(token);
    history.push_back(token);
    if (step + 1 == max_new_tokens) break;  // no logits needed after the last token
    logits = last_logits_per_row(model.decode_step(state, one_row(std::span(&token, 1)))).front();
  }
  return out;
}

std::vector<Seq2SeqOutput> seq2seq_beam_search(model::EncoderDecoderModel& model,
                                               std::span<const int32_t> source,
                                               const Seq2SeqTokens& tokens,
                                               BeamSearchOptions options,
                                               const BeamProcessors* processors) {
  check_max_new(model, options.max_new_tokens, 1);
  options.eos_tokens = tokens.stop_ids;
  Seq2SeqBeamDecoder decoder(model, std::vector<int32_t>(source.begin(), source.end()),
                             options.max_new_tokens + 1);
  const std::vector<int32_t> prompt{tokens.start_id};
  const BeamSearchResult found = beam_search(decoder, prompt, options, processors);
  std::vector<Seq2SeqOutput> out;
  for (const BeamHypothesis& h : found.sequences)
    out.push_back(Seq2SeqOutput{h.tokens, h.score, h.finished_by_eos});
  return out;
}

}  // namespace patchbay::generate
