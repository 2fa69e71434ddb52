// Beam search on a LanguageModel (beam_search.hpp gives the algorithm): the model as a
// BeamDecoder over one decoding state of num_beams sequences, and a sampler chain's
// processors as per-beam BeamProcessors.
//
// Reorders go through LanguageModel::reorder_decoding (each attention layer's state_reorder,
// SDK attention 1.1: KV caches and recurrent states alike). When a layer cannot reorder (an
// older plugin), or with use_state_reorder = false, the decoder rebuilds the state instead:
// a fresh state prefilled with every beam's tokens so far in one decode_step [beams, L] (all
// beams have the same length). Both paths give the same logits (tested).
//
// The prompt and max_new_tokens must fit the model's context (beam search does not slide
// the window: Error(kInvalidArgument) names the lengths).
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "generate/beam_search.hpp"
#include "model/language_model.hpp"
#include "runtime/component_instance.hpp"
#include "runtime/sampler_handle.hpp"

namespace patchbay::generate {

class LanguageModelBeamDecoder : public BeamDecoder {
 public:
  // capacity: positions per beam (prompt + new tokens), <= the model's context length.
  LanguageModelBeamDecoder(model::LanguageModel& model, int64_t capacity, bool use_state_reorder = true);
  std::vector<float> prefill(std::span<const int32_t> prompt, int64_t beams) override;
  void reorder(std::span<const int64_t> source) override;
  std::vector<std::vector<float>> step(std::span<const int32_t> tokens) override;
  int64_t rebuilds() const { return rebuilds_; }  // states rebuilt by re-prefilling

 private:
  std::vector<std::vector<float>> run(const std::vector<std::vector<int32_t>>& rows);  // last logits per row
  model::LanguageModel& model_;
  int64_t capacity_;
  bool use_state_reorder_;
  model::DecodeState state_;
  bool state_valid_ = false;
  std::vector<std::vector<int32_t>> history_;  // tokens each beam's state holds
  int64_t rebuilds_ = 0;
};

// A sampler chain's processors (its selector is not used) applied to each beam's
// log-probabilities; each beam keeps its own clone, so stateful processors follow their beam.
class ChainBeamProcessors : public BeamProcessors {
 public:
  explicit ChainBeamProcessors(runtime::SamplerChain chain) : chain_(std::move(chain)) {}
  void apply(std::span<float> log_probs, std::span<const int32_t> history, size_t prompt_len) override {
    chain_.apply(log_probs, history, prompt_len);
  }
  void accept(int32_t token) override { chain_.accept(token); }
  std::unique_ptr<BeamProcessors> clone() const override {
    return std::make_unique<ChainBeamProcessors>(chain_.clone());
  }

 private:
  runtime::SamplerChain chain_;
};

struct BeamText {
  std::string text;             // decoded generated tokens
  std::vector<int32_t> tokens;  // generated ids (a finishing special token excluded)
  double score = 0;
  bool finished = false;        // ended with a special token (EOS) rather than the length limit
};

struct BeamGenerateResult {
  std::vector<BeamText> sequences;  // best first
  int64_t prompt_tokens = 0;
  int64_t steps = 0;
  int64_t state_rebuilds = 0;
  double seconds = 0;
};

// Encodes the prompt, runs beam_search with the tokenizer's special tokens as EOS (unless
// `stop_at_special` is false) and decodes the results. `chain` is nullable.
BeamGenerateResult beam_generate(model::LanguageModel& model, const runtime::TokenizerHandle& tokenizer,
                                 std::string_view prompt, BeamSearchOptions options, bool stop_at_special,
                                 const runtime::SamplerChain* chain, bool use_state_reorder = true);

}  // namespace patchbay::generate
