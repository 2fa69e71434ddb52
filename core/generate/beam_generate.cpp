// LanguageModelBeamDecoder, ChainBeamProcessors' uses and beam_generate() (beam_generate.hpp).
#include "generate/beam_generate.hpp"

#include <algorithm>
#include <chrono>

#include "common/error.hpp"
#include "engine/ops.hpp"
#include "generate/logit_rows.hpp"

namespace patchbay::generate {

LanguageModelBeamDecoder::LanguageModelBeamDecoder(model::LanguageModel& model, int64_t capacity,
                                                   bool use_state_reorder)
    : model_(model), capacity_(capacity), use_state_reorder_(use_state_reorder) {}

std::vector<std::vector<float>> LanguageModelBeamDecoder::run(
    const std::vector<std::vector<int32_t>>& rows) {
  // [beams, T, V] -> each beam's last position [beams][V]
  return last_logits_per_row(model_.decode_step(state_, token_rows(rows)));
}

std::vector<float> LanguageModelBeamDecoder::prefill(std::span<const int32_t> prompt,
                                                     int64_t beams) {
  history_.assign(static_cast<size_t>(beams), std::vector<int32_t>(prompt.begin(), prompt.end()));
  state_ = model_.start_decoding(beams, capacity_);
  state_valid_ = true;
  return run(history_).front();
}

void LanguageModelBeamDecoder::reorder(std::span<const int64_t> source) {
  std::vector<std::vector<int32_t>> next;
  next.reserve(source.size());
  for (int64_t s : source) next.push_back(history_.at(static_cast<size_t>(s)));
  history_ = std::move(next);
  if (!state_valid_) return;
  if (!use_state_reorder_ || !model_.reorder_decoding(state_, source)) {
    state_valid_ = false;
    // A layer that cannot reorder will not learn to: rebuild from now on.
    use_state_reorder_ = false;
  }
}

std::vector<std::vector<float>> LanguageModelBeamDecoder::step(std::span<const int32_t> tokens) {
  for (size_t i = 0; i < tokens.size(); ++i) history_[i].push_back(tokens[i]);
  if (state_valid_) {
    std::vector<std::vector<int32_t>> rows;
    for (int32_t t : tokens) rows.push_back({t});
    return run(rows);
  }
  // Rebuild: a fresh state prefilled with every beam's tokens so far.
  ++rebuilds_;
  state_ = model_.start_decoding(static_cast<int64_t>(history_.size()), capacity_);
  state_valid_ = use_state_reorder_;  // keep rebuilding when reorders are off
  return run(history_);
}

BeamGenerateResult beam_generate(model::LanguageModel& model,
                                 const runtime::TokenizerHandle& tokenizer, std::string_view prompt,
                                 BeamSearchOptions options, bool stop_at_special,
                                 const runtime::SamplerChain* chain, bool use_state_reorder) {
  const auto start = std::chrono::steady_clock::now();
  const std::vector<int32_t> ids = tokenizer.encode(prompt);
  if (ids.empty()) {
    throw Error(ErrorKind::kInvalidArgument,
                "beam search: the prompt encodes to no tokens; give at least one character");
  }
  const int64_t context = model.options().context_length;
  const int64_t needed = static_cast<int64_t>(ids.size()) + options.max_new_tokens;
  if (needed > context) {
    throw Error(ErrorKind::kInvalidArgument,
                "beam search: prompt (" + std::to_string(ids.size()) +
                    " tokens) + max_new_tokens (" + std::to_string(options.max_new_tokens) +
                    ") exceed the model's context of " + std::to_string(context) +
                    "; beam search does not slide the window: shorten the prompt or " +
                    "ask for fewer tokens");
  }
  if (stop_at_special) {
    for (const runtime::SpecialTokenInfo& s : tokenizer.special_tokens())
      options.eos_tokens.push_back(s.id);
  }
  LanguageModelBeamDecoder decoder(model, needed, use_state_reorder);
  std::unique_ptr<ChainBeamProcessors> processors;
  if (chain != nullptr) processors = std::make_unique<ChainBeamProcessors>(chain->clone());
  const BeamSearchResult found = beam_search(decoder, ids, options, processors.get());
  BeamGenerateResult result;
  result.prompt_tokens = static_cast<int64_t>(ids.size());
  result.steps = found.steps;
  result.state_rebuilds = decoder.rebuilds();
  for (const BeamHypothesis& h : found.sequences)
    result.sequences.push_back(
        BeamText{tokenizer.decode(h.tokens), h.tokens, h.score, h.finished_by_eos});
  result.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  return result;
}

}  // namespace patchbay::generate
